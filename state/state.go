// Package state is Vigil's one list of task-instance states, run states
// and reasons, and of the transitions each actor may make (docs/design.md §3).
// Every layer (store, scheduler, reaper, api) uses these constants; the
// database mirrors them in CHECK constraints, and a test in store checks
// the two agree. The package imports nothing of Vigil's: it is a leaf.
package state

// TI is the state of one task instance.
type TI string

// Task-instance states. Each comment says who moves a TI into the state
// and who moves it out.
const (
	// TINone: created with its run; the scheduler moves it on once its
	// upstreams are decided.
	TINone TI = "none"
	// TIScheduled: upstreams succeeded (or a retry or a never-started
	// requeue is due); the scheduler queues it within max_active_tasks.
	TIScheduled TI = "scheduled"
	// TIQueued: waiting for an agent's claim; the dispatch-lost reaper
	// fails it when no live agent could ever take it.
	TIQueued TI = "queued"
	// TIRunning: claimed by an agent; left by the agent's completion or by
	// the agent-lost reaper and the execution-timeout backstop.
	TIRunning TI = "running"
	// TISuccess: terminal. A late success may also land here from
	// up_for_retry, scheduled, queued or failed (docs/design.md §6); an
	// operator's clear takes it back to none, a mark sets it
	// (docs/rerun.md), as for failed, upstream_failed and skipped.
	TISuccess TI = "success"
	// TIFailed: terminal, with a Reason.
	TIFailed TI = "failed"
	// TIUpForRetry: a try failed with budget left; the scheduler moves it
	// to scheduled once next_retry_at is due.
	TIUpForRetry TI = "up_for_retry"
	// TIUpstreamFailed: terminal; an upstream failed or was cancelled. A
	// late success of that upstream returns it to none.
	TIUpstreamFailed TI = "upstream_failed"
	// TISkipped: terminal; the scheduler found its trigger rule can never
	// be met (reason trigger_rule), or its try exited with the task's
	// skip_exit_code (reason skip_exit_code). Its dependents' trigger rules
	// judge it (docs/trigger-rules.md).
	TISkipped TI = "skipped"
	// TICancelled: terminal; the run was cancelled or timed out.
	TICancelled TI = "cancelled"
)

// TIStates lists every task-instance state, in lifecycle order.
func TIStates() []TI {
	return []TI{TINone, TIScheduled, TIQueued, TIRunning, TISuccess, TIFailed, TIUpForRetry,
		TIUpstreamFailed, TISkipped, TICancelled}
}

// Terminal reports whether no scheduler step moves the TI out of s.
func (s TI) Terminal() bool {
	switch s {
	case TISuccess, TIFailed, TIUpstreamFailed, TISkipped, TICancelled:
		return true
	}
	return false
}

// Active reports whether a TI in s still has work ahead that the
// scheduler or an agent will do: the states an orphaned run has none of.
func (s TI) Active() bool {
	switch s {
	case TIScheduled, TIQueued, TIRunning, TIUpForRetry:
		return true
	}
	return false
}

// Done reports whether s lets its run succeed: a run whose TIs all
// ended success or skipped succeeds, any other end fails it.
func (s TI) Done() bool { return s == TISuccess || s == TISkipped }

// FailsDependents reports whether a TI in s counts as failed for its
// dependents' trigger rules (a terminal state that is not Done): under
// all_success they become upstream_failed.
func (s TI) FailsDependents() bool { return s.Terminal() && !s.Done() }

// Dispatched reports whether a TI in s is handed to the agents, waiting
// for a claim or claimed: it holds one of its run's max_active_tasks
// places, and vigil_task_instances counts it.
func (s TI) Dispatched() bool { return s == TIQueued || s == TIRunning }

// Culprit reports whether a TI in s carries the cause of its run's
// failure: the run takes the reason of its first such TI.
func (s TI) Culprit() bool { return s == TIFailed || s == TICancelled }

// Run is the state of one DAG run.
type Run string

// Run states: queued -> running -> success | failed | cancelled.
const (
	// RunQueued: triggered; the scheduler starts it on its next tick.
	RunQueued Run = "queued"
	// RunRunning: the scheduler finalizes it once every TI is terminal;
	// the orphan reaper and the run timeout end it otherwise.
	RunRunning Run = "running"
	// RunSuccess: terminal; every TI succeeded or was skipped.
	RunSuccess Run = "success"
	// RunFailed: terminal, with the Reason of the TI that failed it.
	RunFailed Run = "failed"
	// RunCancelled: terminal; by an operator (cancelled) or run_timeout.
	RunCancelled Run = "cancelled"
)

// RunStates lists every run state.
func RunStates() []Run {
	return []Run{RunQueued, RunRunning, RunSuccess, RunFailed, RunCancelled}
}

// Terminal reports whether the run has ended.
func (s Run) Terminal() bool {
	return s == RunSuccess || s == RunFailed || s == RunCancelled
}

// Live reports whether the run has not ended: queued or running.
func (s Run) Live() bool { return !s.Terminal() }

// Reason is the machine-readable cause recorded on a TI that ends failed,
// cancelled or skipped, or is requeued, and on a run that fails (docs/design.md §3).
type Reason string

// Reasons.
const (
	ReasonAgentLost        Reason = "agent_lost"        // its agent stopped heartbeating
	ReasonDispatchLost     Reason = "dispatch_lost"     // no live agent could take it, or it never started
	ReasonOrphaned         Reason = "orphaned"          // its run had nothing left to do
	ReasonExecutionTimeout Reason = "execution_timeout" // ran past execution_timeout
	ReasonRunTimeout       Reason = "run_timeout"       // its run passed the DAG's timeout
	ReasonCancelled        Reason = "cancelled"         // an operator cancelled the run
	ReasonExitCode         Reason = "exit_code"         // the command failed
	ReasonUpstreamFailed   Reason = "upstream_failed"   // an upstream failed
	ReasonNoMatchingAgent  Reason = "no_matching_agent" // no agent offers the required tags
	ReasonAgentShutdown    Reason = "agent_shutdown"    // its agent drained or stopped and killed it
	ReasonSignal           Reason = "signal"            // a signal Vigil did not send killed it; the message names it
	ReasonStartFailed      Reason = "start_failed"      // the command could not start (not found, permission)
	ReasonSecretMissing    Reason = "secret_missing"    // a secret its env names was deleted after the DAG was applied
	ReasonOutputTooLarge   Reason = "output_too_large"  // it exited 0 but wrote more outputs than a TI may keep (64 KiB)
	ReasonOutputInvalid    Reason = "output_invalid"    // it exited 0 but its VIGIL_OUTPUT file is not in the outputs format
	ReasonMarked           Reason = "marked"            // an operator set the state by hand (vigil tasks mark; docs/rerun.md)
	ReasonSkipExitCode     Reason = "skip_exit_code"    // skipped: the try exited with the task's skip_exit_code
	ReasonTriggerRule      Reason = "trigger_rule"      // skipped: its trigger rule can never be met
)

// Reasons lists every reason.
func Reasons() []Reason {
	return []Reason{ReasonAgentLost, ReasonDispatchLost, ReasonOrphaned, ReasonExecutionTimeout,
		ReasonRunTimeout, ReasonCancelled, ReasonExitCode, ReasonUpstreamFailed, ReasonNoMatchingAgent,
		ReasonAgentShutdown, ReasonSignal, ReasonStartFailed, ReasonSecretMissing, ReasonOutputTooLarge, ReasonOutputInvalid,
		ReasonMarked, ReasonSkipExitCode, ReasonTriggerRule}
}

// Actor is who makes a transition; each may make only its own.
type Actor string

// Actors.
const (
	ActorScheduler    Actor = "scheduler"     // the leader's tick
	ActorAgent        Actor = "agent"         // claims and completions
	ActorReaper       Actor = "reaper"        // the leader's recovery services
	ActorOperator     Actor = "operator"      // cancel, clear, mark
	ActorLateComplete Actor = "late_complete" // a success accepted after a reap
)

// Transition is one allowed task-instance move.
type Transition struct {
	From, To TI
	By       Actor
}

// TITransitions is the written-down state machine: every move any layer
// makes. The store's SQL implements exactly these; a reviewer adding a
// write adds its row here first.
var TITransitions = []Transition{
	{TINone, TIScheduled, ActorScheduler},
	{TINone, TIUpstreamFailed, ActorScheduler},
	{TINone, TISkipped, ActorScheduler}, // its trigger rule can never be met (docs/trigger-rules.md)
	{TIScheduled, TIQueued, ActorScheduler},
	{TINone, TIQueued, ActorScheduler}, // ready with a place in its run: scheduled and queued in one write
	{TIUpForRetry, TIScheduled, ActorScheduler},
	{TIQueued, TIRunning, ActorAgent},
	{TIRunning, TISuccess, ActorAgent},
	{TIRunning, TIFailed, ActorAgent},
	{TIRunning, TIUpForRetry, ActorAgent},
	{TIRunning, TISkipped, ActorAgent},     // exited with its skip_exit_code
	{TIRunning, TIFailed, ActorReaper},     // agent_lost, execution_timeout, dispatch_lost after 5 dispatches
	{TIRunning, TIUpForRetry, ActorReaper}, // agent_lost, execution_timeout with budget left
	{TIRunning, TIScheduled, ActorReaper},  // never-started requeue
	{TIQueued, TIFailed, ActorReaper},      // dispatch_lost
	{TINone, TIFailed, ActorReaper},        // orphaned
	{TIUpForRetry, TISuccess, ActorLateComplete},
	{TIScheduled, TISuccess, ActorLateComplete},
	{TIQueued, TISuccess, ActorLateComplete},
	{TIFailed, TISuccess, ActorLateComplete},
	{TIUpstreamFailed, TINone, ActorLateComplete}, // dependents re-derived after a late success
	{TISkipped, TINone, ActorLateComplete},        // same, for one its trigger rule skipped (docs/trigger-rules.md)
	// Clear (docs/rerun.md): an ended TI goes back to none and runs again
	// as a new try; a queued or running one is refused, so never cleared.
	{TISuccess, TINone, ActorOperator},
	{TIFailed, TINone, ActorOperator},
	{TIUpstreamFailed, TINone, ActorOperator},
	{TISkipped, TINone, ActorOperator},
	// Mark (docs/rerun.md): any TI no agent holds may be set to success or
	// failed by hand, with reason marked.
	{TINone, TISuccess, ActorOperator},
	{TIScheduled, TISuccess, ActorOperator},
	{TIUpForRetry, TISuccess, ActorOperator},
	{TIFailed, TISuccess, ActorOperator},
	{TIUpstreamFailed, TISuccess, ActorOperator},
	{TISkipped, TISuccess, ActorOperator},
	{TINone, TIFailed, ActorOperator},
	{TIScheduled, TIFailed, ActorOperator},
	{TIUpForRetry, TIFailed, ActorOperator},
	{TISuccess, TIFailed, ActorOperator},
	{TIUpstreamFailed, TIFailed, ActorOperator},
	{TISkipped, TIFailed, ActorOperator},
}

// Allowed reports whether by may move a TI from one state to another;
// cancellation (any non-terminal state to cancelled, by the operator or
// the run-timeout reaper) is implied.
func Allowed(from, to TI, by Actor) bool {
	if to == TICancelled {
		return !from.Terminal() && (by == ActorOperator || by == ActorReaper)
	}
	for _, t := range TITransitions {
		if t.From == from && t.To == to && t.By == by {
			return true
		}
	}
	return false
}

// Strings converts typed values to a []string for SQL array parameters.
func Strings[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// Where returns the values of list for which keep reports true, in their
// order: Where(TIStates(), TI.Active) is the active states. The store
// renders such lists into its SQL, so no layer spells a set out again.
func Where[T any](list []T, keep func(T) bool) []T {
	var out []T
	for _, v := range list {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

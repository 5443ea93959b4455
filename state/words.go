package state

// The words of the agent protocol and of the agents table: how an attempt
// ended, why an agent must stop one, and the life of an agent's
// registration. api/protocol carries them on the wire as these types.

// Outcome is how an attempt ended, as its agent reports it.
type Outcome string

// Completion outcomes.
const (
	OutcomeSuccess          Outcome = "success"
	OutcomeFailed           Outcome = "failed"            // non-zero exit, a kill or a start failure; see Failure
	OutcomeExecutionTimeout Outcome = "execution_timeout" // the agent killed it
)

// Outcomes lists every completion outcome.
func Outcomes() []Outcome {
	return []Outcome{OutcomeSuccess, OutcomeFailed, OutcomeExecutionTimeout}
}

// Failure refines OutcomeFailed: why the process failed when it did not
// exit with a code of its own. Empty: it exited non-zero (ReasonExitCode).
type Failure string

// Failures, each recorded as the Reason of the same name.
const (
	// FailureAgentShutdown: the agent drained or stopped and killed the
	// process group.
	FailureAgentShutdown Failure = "agent_shutdown"
	// FailureSignal: a signal the agent did not send killed the process;
	// the completion names the signal.
	FailureSignal Failure = "signal"
	// FailureStartFailed: the command could not be started, e.g. not found
	// or not executable.
	FailureStartFailed Failure = "start_failed"
	// FailureOutputTooLarge: the process exited 0, but the outputs it
	// wrote to its VIGIL_OUTPUT file are over the limit of a TI
	// (docs/task-environment.md, "Outputs"). The server records it too
	// for a success whose outputs are over the limit.
	FailureOutputTooLarge Failure = "output_too_large"
	// FailureOutputInvalid: the process exited 0, but its VIGIL_OUTPUT
	// file is not in the outputs format; the error names the line.
	FailureOutputInvalid Failure = "output_invalid"
)

// FailureSecretMissing: a secret the task's env names no longer exists.
// The API records it for the agent that claimed the TI, which never
// receives the task; no agent reports it (AgentFailures).
const FailureSecretMissing Failure = "secret_missing"

// Failures lists every failure.
func Failures() []Failure {
	return []Failure{FailureAgentShutdown, FailureSignal, FailureStartFailed, FailureOutputTooLarge, FailureOutputInvalid,
		FailureSecretMissing}
}

// AgentFailures lists the failures an agent may report in a completion:
// all but FailureSecretMissing, which only the server records.
func AgentFailures() []Failure {
	return []Failure{FailureAgentShutdown, FailureSignal, FailureStartFailed, FailureOutputTooLarge, FailureOutputInvalid}
}

// StopReason says why an agent must stop an attempt: in register and
// heartbeat replies, and in a stale-attempt refusal.
type StopReason string

// Stop reasons.
const (
	StopCancelled  StopReason = "cancelled"  // the run or TI was cancelled
	StopReaped     StopReason = "reaped"     // a reaper gave up on the attempt
	StopSuperseded StopReason = "superseded" // a newer attempt exists
	StopUnknown    StopReason = "unknown"    // there is no such task instance
	StopFinished   StopReason = "finished"   // the TI already reached a terminal state
)

// StopReasons lists every stop reason.
func StopReasons() []StopReason {
	return []StopReason{StopCancelled, StopReaped, StopSuperseded, StopUnknown, StopFinished}
}

// Agent is the state of one agent registration.
type Agent string

// Agent states.
const (
	// AgentActive: registered and heartbeating; a register, claim or
	// heartbeat (re)activates it.
	AgentActive Agent = "active"
	// AgentInactive: silent past the agent-lost threshold (the
	// agent-inactive reaper); its next heartbeat reactivates it.
	AgentInactive Agent = "inactive"
	// AgentDeregistered: an ephemeral agent that exited; terminal.
	AgentDeregistered Agent = "deregistered"
)

// AgentStates lists every agent state.
func AgentStates() []Agent {
	return []Agent{AgentActive, AgentInactive, AgentDeregistered}
}

// Reaper names one of the leader's recovery services (docs/design.md §6,
// §7): the reaper label of metrics and of `vigil reap` reports.
type Reaper string

// Reapers.
const (
	ReaperAgentInactive    Reaper = "agent_inactive"
	ReaperAgentLost        Reaper = "agent_lost"
	ReaperExecutionTimeout Reaper = "execution_timeout"
	ReaperRunTimeout       Reaper = "run_timeout"
	ReaperDispatchLost     Reaper = "dispatch_lost"
	ReaperOrphan           Reaper = "orphan"
)

// Reapers lists every reaper, in the order a sweep runs them.
func Reapers() []Reaper {
	return []Reaper{ReaperAgentInactive, ReaperAgentLost, ReaperExecutionTimeout, ReaperRunTimeout,
		ReaperDispatchLost, ReaperOrphan}
}

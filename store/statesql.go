package store

import (
	"fmt"
	"strings"

	"github.com/vigil-sched/vigil/state"
)

// The state sets the store's SQL uses, rendered once from package state's
// typed lists (adr/0013-state-package.md): no statement spells a set out,
// so a state added to state reaches every query that means "active" or
// "terminal". Single states stay literals in the SQL where a partial
// index's predicate must match them; TestSQLLiteralsAreTypedValues checks
// each against the typed lists.
var (
	tiTerminalSQL        = sqlList(state.Where(state.TIStates(), state.TI.Terminal))        // success, failed, upstream_failed, skipped, cancelled
	tiActiveSQL          = sqlList(state.Where(state.TIStates(), state.TI.Active))          // scheduled, queued, running, up_for_retry
	tiDoneSQL            = sqlList(state.Where(state.TIStates(), state.TI.Done))            // success, skipped
	tiFailsDependentsSQL = sqlList(state.Where(state.TIStates(), state.TI.FailsDependents)) // failed, upstream_failed, cancelled
	tiCulpritSQL         = sqlList(state.Where(state.TIStates(), state.TI.Culprit))         // failed, cancelled
	tiDispatchedSQL      = sqlList(state.Where(state.TIStates(), state.TI.Dispatched))      // queued, running
	runTerminalSQL       = sqlList(state.Where(state.RunStates(), state.Run.Terminal))      // success, failed, cancelled
	runLiveSQL           = sqlList(state.Where(state.RunStates(), state.Run.Live))          // queued, running
	agentIdleSQL         = sqlList([]state.Agent{state.AgentInactive, state.AgentDeregistered})
)

// sqlValue renders one typed value as a SQL string literal.
func sqlValue[T ~string](v T) string {
	return "'" + strings.ReplaceAll(string(v), "'", "''") + "'"
}

// sqlList renders typed values as a parenthesized SQL list for IN:
// ('queued', 'running').
func sqlList[T ~string](vs []T) string {
	quoted := make([]string, len(vs))
	for i, v := range vs {
		quoted[i] = sqlValue(v)
	}
	return "(" + strings.Join(quoted, ", ") + ")"
}

// move is one task-instance transition a statement of the store writes:
// from any of from to to, made by by. The statement renders its SET and
// its WHERE guard from it (to, from), and mustMove checks it against
// state.TITransitions when the package is loaded, so a statement cannot
// write a move the state machine does not allow.
type move struct {
	by   state.Actor
	to   state.TI
	from []state.TI
}

// mustMove returns the move, or panics (a programmer's error, found by
// any test of the package) when state.Allowed refuses one of its from
// states.
func mustMove(by state.Actor, to state.TI, from ...state.TI) move {
	if len(from) == 0 {
		panic(fmt.Sprintf("store: a move to %s by %s has no from state", to, by))
	}
	for _, f := range from {
		if !state.Allowed(f, to, by) {
			panic(fmt.Sprintf("store: %s may not move a task instance from %s to %s (state.TITransitions)", by, f, to))
		}
	}
	return move{by: by, to: to, from: from}
}

// To is the target state as a SQL literal, for SET state = ….
func (m move) To() string { return sqlValue(m.to) }

// From is the source states as a SQL list, for WHERE state IN ….
func (m move) From() string { return sqlList(m.from) }

// The moves the store's statements write, each named for its statement.
var (
	moveClaim            = mustMove(state.ActorAgent, state.TIRunning, state.TIQueued)
	moveBatchSuccess     = mustMove(state.ActorAgent, state.TISuccess, state.TIRunning)
	moveRetryDue         = mustMove(state.ActorScheduler, state.TIScheduled, state.TIUpForRetry)
	moveUpstreamFailed   = mustMove(state.ActorScheduler, state.TIUpstreamFailed, state.TINone)
	moveTriggerSkipped   = mustMove(state.ActorScheduler, state.TISkipped, state.TINone)
	moveReadyScheduled   = mustMove(state.ActorScheduler, state.TIScheduled, state.TINone)
	moveReadyQueued      = mustMove(state.ActorScheduler, state.TIQueued, state.TINone, state.TIScheduled)
	moveOrphaned         = mustMove(state.ActorReaper, state.TIFailed, state.TINone)
	moveReopenDependents = mustMove(state.ActorLateComplete, state.TINone, state.TIUpstreamFailed, state.TISkipped)
	// cancelRunTx: every non-terminal TI of the run, by an operator's
	// cancel or by the run-timeout reaper.
	moveCancelByOperator = mustMove(state.ActorOperator, state.TICancelled, state.Where(state.TIStates(), notTerminal)...)
	moveCancelByTimeout  = mustMove(state.ActorReaper, state.TICancelled, state.Where(state.TIStates(), notTerminal)...)
)

func notTerminal(s state.TI) bool { return !s.Terminal() }

// checkMove returns an error unless by may move a TI from from to to: the
// guard of the writes whose states are data (a completion, a reap).
func checkMove(from, to state.TI, by state.Actor) error {
	if !state.Allowed(from, to, by) {
		return fmt.Errorf("%s may not move a task instance from %s to %s (state.TITransitions)", by, from, to)
	}
	return nil
}

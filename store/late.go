package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
)

// Late completions: a success (or any outcome) for the current attempt of a
// TI that a reaper already gave up on (docs/design.md §6, "a completion is never
// lost"; adr/0014-late-success-after-run-end.md).

// reopenDependentsTx returns to none the TIs of a's run that the
// scheduler ended by their trigger rule and that a's success may decide
// otherwise (runGraph.reopenable). Each gets a ti_reopened event; the
// scheduler judges them again on its next pass (finishTI marked the run
// dirty). The caller holds the run row lock, the lock every
// dependency-resolution pass takes first (scheduleRunsTx), so no pass can
// derive a dependent between this read and the caller's commit. It
// returns how many TIs were reopened.
func reopenDependentsTx(ctx context.Context, tx pgx.Tx, a tiAttempt) (int, error) {
	g, err := loadRunGraphTx(ctx, tx, a.runID)
	if err != nil {
		return 0, err
	}
	msg := fmt.Sprintf("upstream %s succeeded late (try %d): dependencies are re-derived", a.taskID, a.tryNumber)
	return reopenTx(ctx, tx, moveReopenDependents, g.ids(g.inOrder(g.reopenable(map[string]bool{a.taskID: true}, state.TISuccess))), msg)
}

// reopenTx returns the TIs ids that the scheduler ended by their trigger
// rule (upstream_failed, or skipped with reason trigger_rule;
// runGraph.reopenable) to none by m (a late success's or an operator's
// move), each with a ti_reopened event
// carrying msg, and returns how many it moved.
func reopenTx(ctx context.Context, tx pgx.Tx, m move, ids []int64, msg string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	tag, err := tx.Exec(ctx, `
		WITH u AS (
		  UPDATE task_instances SET state = `+m.To()+`, reason = NULL, message = NULL, end_date = NULL, updated_at = now()
		   WHERE id = ANY ($1) AND state IN `+sqlList(state.Where(m.from, ruleEndedState))+`
		     AND (state = 'upstream_failed' OR reason = 'trigger_rule') RETURNING id, run_id, task_id, try_number)
		INSERT INTO events (run_id, ti_id, task_id, try_number, kind, message)
		SELECT run_id, id, task_id, try_number, $2, $3 FROM u`, ids, string(state.EventTIReopened), msg)
	return int(tag.RowsAffected()), err
}

// LateOutcome is a success an agent reported for an attempt after a
// reaper (agent-lost or dispatch-lost) had given up on it, as the TI's
// attempt history holds it. Only successes are late outcomes: a reaped
// attempt's late failure agrees with the reaper and is refused 409.
type LateOutcome struct {
	Outcome   state.Outcome // always state.OutcomeSuccess
	TryNumber int           // the try the attempt ran
	AttemptID string        // the attempt it completed
	Time      time.Time     // when the control plane received it
	// Accepted is true when it overturned the reaper (the run was live and
	// the TI became success), false when the run had already ended and it
	// was only recorded.
	Accepted bool
	Message  string // the event's text
}

// lateAfterRunEnd reports whether a completion would have been accepted
// late (lateEligible) but for its run having ended.
func lateAfterRunEnd(a tiAttempt, outcome state.Outcome) bool {
	if outcome != state.OutcomeSuccess || !a.runState.Terminal() {
		return false
	}
	if a.reason != state.ReasonAgentLost && a.reason != state.ReasonDispatchLost {
		return false
	}
	return state.Allowed(a.state, state.TISuccess, state.ActorLateComplete)
}

// recordLateTx records a late success whose run has ended, without
// changing the TI or the run: one late_completion_recorded event on the
// attempt. The caller holds the TI row lock, so a replay of the same
// completion finds the event and writes nothing; it reports whether this
// call wrote it.
func recordLateTx(ctx context.Context, tx pgx.Tx, a tiAttempt, req Completion) (bool, error) {
	msg := fmt.Sprintf("success of try %d arrived after the run ended %s; recorded only: the task instance stays %s (%s) and the run's outcome stands",
		a.tryNumber, a.runState, a.state, a.reason)
	tag, err := tx.Exec(ctx, `
		INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
		SELECT $1, $2, $3, $4, $5::uuid, $6, $7, $8
		 WHERE NOT EXISTS (SELECT 1 FROM events
		                    WHERE run_id = $1 AND ti_id = $2 AND attempt_id = $5::uuid AND kind = $7)`,
		a.runID, a.tiID, a.taskID, a.tryNumber, req.AttemptID, a.agentID, string(state.EventLateRecorded), msg)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// eventAgentLostRequeued is the event kind of the agent-lost reaper's
// requeue of an attempt it judged never started
// (metrics.DecisionAgentLostRequeued; the store does not import metrics).
const eventAgentLostRequeued = "agent_lost_requeued"

// reapedKinds are the event kinds of the reaper decisions that give up on
// an attempt for its agent: failed as agent_lost or dispatch_lost, or
// requeued as never started. A requeued attempt's process may have
// started all the same (its agent was stopped between the spawn and the
// heartbeat reporting it), so its success counts as late like the others'
// (adr/0014, amendment).
var reapedKinds = []string{string(state.ReasonAgentLost), string(state.ReasonDispatchLost), eventAgentLostRequeued}

// recordSupersededLateTx records a success of attempt req.AttemptID that
// an agent-lost or dispatch-lost reaper gave up on for agentID (failed or
// requeued, reapedKinds), after the TI was claimed again (a holds the
// newer attempt): one late_completion_recorded event on the reaped
// attempt, changing nothing, as recordLateTx does after a run ended
// (adr/0014). reaped is false when no such reap of that attempt by
// agentID exists; the caller then refuses the completion as stale. wrote
// is false for a replay. The caller holds the TI row lock. A reaper's
// event kind is its decision, which for the failing reaps is named like
// the reason it sets (metrics.DecisionAgentLost).
func recordSupersededLateTx(ctx context.Context, tx pgx.Tx, a tiAttempt, agentID int64, req Completion) (wrote, reaped bool, err error) {
	var try int
	err = tx.QueryRow(ctx, `
		SELECT try_number FROM events
		 WHERE run_id = $1 AND ti_id = $2 AND attempt_id = $3::uuid AND agent_id = $4 AND kind = ANY ($5)
		 ORDER BY id LIMIT 1`, a.runID, a.tiID, req.AttemptID, agentID, reapedKinds).Scan(&try)
	if errNoRows(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	msg := fmt.Sprintf("success of try %d arrived after try %d had been claimed; recorded only: the task instance stays with try %d (%s)",
		try, a.tryNumber, a.tryNumber, a.state)
	if a.attemptID == "" { // cleared (ClearTIs), not claimed again yet
		msg = fmt.Sprintf("success of try %d arrived after the task instance was cleared; recorded only: it stays %s and runs again as try %d",
			try, a.state, a.tryNumber+1)
	}
	tag, err := tx.Exec(ctx, `
		INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
		SELECT $1, $2, $3, $4, $5::uuid, $6, $7, $8
		 WHERE NOT EXISTS (SELECT 1 FROM events
		                    WHERE run_id = $1 AND ti_id = $2 AND attempt_id = $5::uuid AND kind = $7)`,
		a.runID, a.tiID, a.taskID, try, req.AttemptID, agentID, string(state.EventLateRecorded), msg)
	if err != nil {
		return false, true, err
	}
	return tag.RowsAffected() == 1, true, nil
}

// attachLate fills TaskInstance.Late for the TIs of run runID from the
// run's late-completion events (one read of the run's events).
func (s *Store) attachLate(ctx context.Context, runID int64, tis []TaskInstance) error {
	rows, err := s.pool.Query(ctx, `
		SELECT DISTINCT ON (ti_id) ti_id, kind, coalesce(try_number, 0), coalesce(attempt_id::text, ''), created_at, message
		  FROM events WHERE run_id = $1 AND kind IN ($2, $3) AND ti_id IS NOT NULL
		 ORDER BY ti_id, id DESC`, runID, string(state.EventLateAccepted), string(state.EventLateRecorded))
	if err != nil {
		return err
	}
	late := map[int64]*LateOutcome{}
	for rows.Next() {
		var tiID int64
		var kind state.EventKind
		l := LateOutcome{Outcome: state.OutcomeSuccess}
		if err := rows.Scan(&tiID, &kind, &l.TryNumber, &l.AttemptID, &l.Time, &l.Message); err != nil {
			rows.Close()
			return err
		}
		l.Accepted = kind == state.EventLateAccepted
		late[tiID] = &l
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range tis {
		tis[i].Late = late[tis[i].ID]
	}
	return nil
}

package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
)

// Late completions: a success (or any outcome) for the current attempt of a
// TI that a reaper already gave up on (DESIGN §6, "a completion is never
// lost"; adr/0014-late-success-after-run-end.md).

// EventTIReopened is the event kind written for each dependent a late
// success returns from upstream_failed to none.
const EventTIReopened = "ti_reopened"

// reopenDependentsTx returns to 'none' exactly the TIs of a's run that
// were marked upstream_failed because of a and are no longer blocked now
// that a succeeded: a's transitive dependents through upstream_failed
// TIs, minus any that still have another upstream that failed, was
// cancelled, or stays upstream_failed (the greatest such set). Each gets
// a ti_reopened event; the scheduler re-derives them on its next pass
// (finishTI marked the run dirty). The caller holds the run row lock, the
// lock every dependency-resolution pass takes first (scheduleRunsTx), so
// no pass can mark a dependent upstream_failed between this read and the
// caller's commit. It returns how many TIs were reopened.
func reopenDependentsTx(ctx context.Context, tx pgx.Tx, a tiAttempt) (int, error) {
	type node struct {
		id       int64
		state    state.TI
		upstream []string
	}
	rows, err := tx.Query(ctx, `SELECT id, task_id, state, upstream FROM task_instances WHERE run_id = $1`, a.runID)
	if err != nil {
		return 0, err
	}
	nodes := map[string]*node{}
	children := map[string][]string{}
	for rows.Next() {
		var n node
		var taskID string
		if err := rows.Scan(&n.id, &taskID, &n.state, &n.upstream); err != nil {
			rows.Close()
			return 0, err
		}
		nodes[taskID] = &n
		for _, up := range n.upstream {
			children[up] = append(children[up], taskID)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	// The transitive dependents of a through upstream_failed TIs.
	reopen := map[string]bool{}
	queue := []string{a.taskID}
	for len(queue) > 0 {
		up := queue[0]
		queue = queue[1:]
		for _, c := range children[up] {
			if n := nodes[c]; n != nil && n.state == state.TIUpstreamFailed && !reopen[c] {
				reopen[c] = true
				queue = append(queue, c)
			}
		}
	}
	// Drop, to a fixed point, those another failure still blocks.
	for changed := true; changed; {
		changed = false
		for c := range reopen {
			for _, up := range nodes[c].upstream {
				n := nodes[up]
				if up == a.taskID || reopen[up] || n == nil {
					continue
				}
				if n.state == state.TIFailed || n.state == state.TICancelled || n.state == state.TIUpstreamFailed {
					delete(reopen, c)
					changed = true
					break
				}
			}
		}
	}
	if len(reopen) == 0 {
		return 0, nil
	}
	ids := make([]int64, 0, len(reopen))
	for c := range reopen {
		ids = append(ids, nodes[c].id)
	}
	msg := fmt.Sprintf("upstream %s succeeded late (try %d): dependencies are re-derived", a.taskID, a.tryNumber)
	tag, err := tx.Exec(ctx, `
		WITH u AS (
		  UPDATE task_instances SET state = 'none', reason = NULL, message = NULL, end_date = NULL, updated_at = now()
		   WHERE id = ANY ($1) AND state = 'upstream_failed' RETURNING id, run_id, task_id, try_number)
		INSERT INTO events (run_id, ti_id, task_id, try_number, kind, message)
		SELECT run_id, id, task_id, try_number, $2, $3 FROM u`, ids, EventTIReopened, msg)
	return int(tag.RowsAffected()), err
}

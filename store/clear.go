package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
)

// Clear and mark (docs/rerun.md): an operator's writes to the TIs of one
// run. Each is one transaction of the API, not a leader action: it locks
// the run row (the lock the scheduler's pass, a cancel and a late success
// take first), writes the TIs, their events and the run, and marks the
// run dirty for the scheduler, whichever replica leads then. A leader
// that dies before its pass loses nothing: run_dirty is a table.

// ClearRequest selects the TIs of one run to clear.
type ClearRequest struct {
	RunID int64
	// TaskIDs names the tasks to clear; empty: every TI that ended
	// failed, upstream_failed or skipped.
	TaskIDs []string
	// Downstream and Upstream add the selection's transitive dependents
	// and dependencies.
	Downstream, Upstream bool
	// OnlyFailed keeps, of the selection, the TIs that ended failed or
	// upstream_failed.
	OnlyFailed bool
	// DryRun plans the clear and writes nothing.
	DryRun bool
	// Actor is who clears (the API's request identity), Reason their
	// optional why; both go into each TI's ti_cleared event.
	Actor, Reason string
}

// ClearedTI is one TI a clear returns to none, as it was before.
type ClearedTI struct {
	TaskID    string
	State     state.TI // the state it left
	TryNumber int      // its last try; the next runs as TryNumber+1
	// Rederived is true for a TI the scheduler had ended by its trigger
	// rule (upstream_failed, or skipped by the rule), not selected itself,
	// cleared because the clear of a TI it depends on may change that
	// (runGraph.reopenable).
	Rederived bool
}

// ClearResult is what a clear did, or would do (DryRun).
type ClearResult struct {
	Run     Run
	Cleared []ClearedTI
}

// clearable reports whether a TI in s may be cleared: it ended (any
// terminal state but cancelled, which only a cancelled run holds).
func clearable(s state.TI) bool { return s.Terminal() && s != state.TICancelled }

// defaultClear is the selection of a clear that names no task.
func defaultClear(s state.TI) bool {
	return s == state.TIFailed || s == state.TIUpstreamFailed || s == state.TISkipped
}

// moveClear is the clear's write; moveMarkSuccess and moveMarkFailed the
// mark's (docs/rerun.md).
var (
	moveClear       = mustMove(state.ActorOperator, state.TINone, state.Where(state.TIStates(), clearable)...)
	moveMarkSuccess = mustMove(state.ActorOperator, state.TISuccess, state.Where(state.TIStates(), markable(state.TISuccess))...)
	moveMarkFailed  = mustMove(state.ActorOperator, state.TIFailed, state.Where(state.TIStates(), markable(state.TIFailed))...)
)

// markable returns whether a TI may be marked to: any state no agent
// holds, but cancelled and to itself.
func markable(to state.TI) func(state.TI) bool {
	return func(s state.TI) bool { return s != to && !s.Dispatched() && s != state.TICancelled }
}

// planClear picks the TIs req clears in g: the selection (req.TaskIDs or
// defaultClear), widened by Downstream and Upstream, narrowed by
// OnlyFailed, of which the ended ones are cleared and the pending ones
// (none, scheduled, up_for_retry) left as they are; plus the dependents
// the scheduler ended by their trigger rule that the clear may decide
// otherwise (runGraph.reopenable), for the scheduler to judge again.
// Errors: ErrNotFound for a task not in the run; ErrConflict naming each
// selected TI an agent holds (queued or running).
func planClear(g runGraph, req ClearRequest) ([]ClearedTI, error) {
	if bad := g.unknown(req.TaskIDs); len(bad) > 0 {
		return nil, fmt.Errorf("task_ids: %s: %w", strings.Join(quoteAll(bad), ", "), errNotInRun(req.RunID, g))
	}
	sel := map[string]bool{}
	for _, id := range g.order {
		if len(req.TaskIDs) == 0 && defaultClear(g.nodes[id].state) {
			sel[id] = true
		}
	}
	for _, id := range req.TaskIDs {
		sel[id] = true
	}
	// Both widen the selection as named, as Airflow's do: the upstream of
	// a downstream task is not cleared.
	wide := map[string]bool{}
	for id := range sel {
		wide[id] = true
	}
	if req.Downstream {
		for id := range g.closure(sel, g.downstream) {
			wide[id] = true
		}
	}
	if req.Upstream {
		for id := range g.closure(sel, g.upstreamOf) {
			wide[id] = true
		}
	}
	sel = wide
	var busy []string
	roots := map[string]bool{}
	for _, id := range g.inOrder(sel) {
		n := g.nodes[id]
		if req.OnlyFailed && n.state != state.TIFailed && n.state != state.TIUpstreamFailed {
			continue
		}
		switch {
		case n.state.Dispatched():
			busy = append(busy, fmt.Sprintf("%s is %s (try %d)", id, n.state, n.tryNumber))
		case clearable(n.state):
			roots[id] = true
		}
	}
	if len(busy) > 0 {
		return nil, fmt.Errorf("task instances of run %d an agent holds cannot be cleared: %s; wait for them to end, or cancel the run: %w",
			req.RunID, strings.Join(busy, ", "), ErrConflict)
	}
	rederived := g.reopenable(roots, state.TINone)
	var out []ClearedTI
	for _, id := range g.order {
		if roots[id] || rederived[id] {
			n := g.nodes[id]
			out = append(out, ClearedTI{TaskID: id, State: n.state, TryNumber: n.tryNumber, Rederived: rederived[id]})
		}
	}
	return out, nil
}

func quoteAll(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprintf("%q", id)
	}
	return out
}

// errNotInRun is the ErrNotFound of a task id that is no task of the run,
// listing the run's tasks.
func errNotInRun(runID int64, g runGraph) error {
	return fmt.Errorf("not a task of run %d (its tasks: %s): %w", runID, strings.Join(g.order, ", "), ErrNotFound)
}

// lockRunTx locks run runID (the order every writer of its TIs keeps:
// run, then TIs) and returns its state. Errors: ErrNotFound; ErrConflict
// for a queued or cancelled run, which a clear or mark does not change
// (what names the operation).
func lockRunTx(ctx context.Context, tx pgx.Tx, runID int64, what string) (state.Run, error) {
	var cur state.Run
	err := tx.QueryRow(ctx, `SELECT state FROM runs WHERE id = $1 FOR NO KEY UPDATE`, runID).Scan(&cur)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("run %d: %w", runID, ErrNotFound)
	}
	if err != nil {
		return "", err
	}
	switch cur {
	case state.RunCancelled:
		return "", fmt.Errorf("run %d was cancelled; a cancelled run is not %s again: trigger a new run: %w", runID, what, ErrConflict)
	case state.RunQueued:
		return "", fmt.Errorf("run %d is queued: none of its tasks has run yet: %w", runID, ErrConflict)
	}
	return cur, nil
}

// ClearTIs clears the TIs req selects (planClear) in one transaction:
// each returns to none with its reason, attempt and times reset and
// try_number kept, so its next claim runs try TryNumber+1 with its retries
// again (retry_base); each gets a ti_cleared event naming req.Actor and
// req.Reason and the attempt it ended. A cleared attempt's late
// completion finds no current attempt and changes nothing (Complete). An
// ended run returns to running (reopenRunTx). With DryRun, or when
// nothing is selected, nothing is written.
// Errors: ErrNotFound (run or task); ErrConflict for a queued or
// cancelled run, or naming each selected TI that is queued or running.
func (s *Store) ClearTIs(ctx context.Context, req ClearRequest) (ClearResult, error) {
	var res ClearResult
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		cur, err := lockRunTx(ctx, tx, req.RunID, "cleared")
		if err != nil {
			return err
		}
		g, err := loadRunGraphTx(ctx, tx, req.RunID)
		if err != nil {
			return err
		}
		if res.Cleared, err = planClear(g, req); err != nil || req.DryRun || len(res.Cleared) == 0 {
			return err
		}
		if err := clearTx(ctx, tx, g, req, res.Cleared); err != nil {
			return err
		}
		return reopenRunTx(ctx, tx, req.RunID, cur, fmt.Sprintf("%d task instances cleared by %s", len(res.Cleared), req.Actor))
	})
	if err != nil {
		return ClearResult{}, fmt.Errorf("clear run %d: %w", req.RunID, err)
	}
	d, err := s.GetRun(ctx, req.RunID)
	res.Run = d.Run
	return res, err
}

// clearTx writes a planned clear: the TIs back to none, each with its
// ti_cleared event on the attempt it ended.
func clearTx(ctx context.Context, tx pgx.Tx, g runGraph, req ClearRequest, cleared []ClearedTI) error {
	ids := make([]int64, len(cleared))
	msgs := make([]string, len(cleared))
	why := ""
	if req.Reason != "" {
		why = ": " + req.Reason
	}
	for i, c := range cleared {
		ids[i] = g.nodes[c.TaskID].id
		what := fmt.Sprintf("was %s", c.State)
		if c.TryNumber > 0 {
			what = fmt.Sprintf("try %d was %s", c.TryNumber, c.State)
		}
		if c.Rederived {
			what += ", re-derived with the tasks it depends on"
		}
		msgs[i] = fmt.Sprintf("cleared by %s (%s); the next try is %d%s", req.Actor, what, c.TryNumber+1, why)
	}
	// The old row's attempt and agent go on the event (the history of the
	// try), then the row forgets them: a completion of the cleared attempt
	// is no longer the current one.
	tag, err := tx.Exec(ctx, `
		WITH x AS (
		  SELECT t.id, t.attempt_id, t.agent_id, m.msg
		    FROM unnest($1::bigint[], $2::text[]) AS m(id, msg) JOIN task_instances t ON t.id = m.id),
		u AS (
		  UPDATE task_instances t
		     SET state = `+moveClear.To()+`, reason = NULL, message = NULL, exit_code = NULL, attempt_id = NULL,
		         agent_id = NULL, queued_at = NULL, claimed_at = NULL, started_at = NULL, last_heartbeat_at = NULL,
		         timeout_at = NULL, end_date = NULL, next_retry_at = NULL, dispatch_attempts = 0,
		         retry_base = t.try_number, updated_at = now()
		    FROM x WHERE t.id = x.id AND t.state IN `+moveClear.From()+`
		  RETURNING t.id, t.run_id, t.task_id, t.try_number)
		INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
		SELECT u.run_id, u.id, u.task_id, u.try_number, x.attempt_id, x.agent_id, $3, x.msg
		  FROM u JOIN x ON x.id = u.id`, ids, msgs, string(state.EventTICleared))
	if err != nil {
		return err
	}
	if n := int(tag.RowsAffected()); n != len(ids) {
		// Unreachable while the run lock is held: every move out of an
		// ended state takes it first.
		return fmt.Errorf("cleared %d of %d task instances: another write moved one: %w", n, len(ids), ErrConflict)
	}
	return nil
}

// reopenRunTx returns an ended (success or failed) run to running, with
// its end, reason and idle mark reset and its run_timeout counted afresh
// from now, and a run_reopened event carrying msg; a running run stays.
// Either way the run is marked dirty: the scheduler re-derives its TIs,
// queues the cleared ones and finalizes it, whichever replica leads.
func reopenRunTx(ctx context.Context, tx pgx.Tx, runID int64, cur state.Run, msg string) error {
	if cur.Terminal() {
		_, err := tx.Exec(ctx, `
			WITH r AS (
			  UPDATE runs SET state = 'running', reason = NULL, message = NULL, end_date = NULL, idle_since = NULL,
			         deadline_at = now() + timeout, updated_at = now()
			   WHERE id = $1 AND state IN `+runTerminalSQL+` RETURNING id)
			INSERT INTO events (run_id, kind, message) SELECT id, $2, $3 FROM r`,
			runID, string(state.EventRunReopened), fmt.Sprintf("run back to running from %s: %s", cur, msg))
		if err != nil {
			return err
		}
	}
	return markDirty(ctx, tx, runID)
}

package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
)

// MarkRequest sets one TI of a run, and with Downstream its transitive
// dependents, to success or failed by hand (docs/rerun.md).
type MarkRequest struct {
	RunID  int64
	TaskID string
	// To is state.TISuccess or state.TIFailed.
	To         state.TI
	Downstream bool
	// Actor is who marks (the API's request identity), Reason their
	// optional why; both go into each TI's ti_marked event.
	Actor, Reason string
}

// MarkedTI is one TI a mark set, as it was before.
type MarkedTI struct {
	TaskID string
	State  state.TI // the state it left
}

// MarkResult is what a mark did: the TIs it set, and the dependents the
// scheduler had ended by their trigger rule that the mark returned to
// none (Reopened, re-derived by the scheduler; runGraph.reopenable).
type MarkResult struct {
	Run      Run
	Marked   []MarkedTI
	Reopened []string
}

// planMark picks the TIs req sets in g: the task, and with Downstream its
// transitive dependents, but those already in req.To. Errors: ErrNotFound
// for a task not in the run; ErrConflict naming each TI an agent holds
// (queued or running).
func planMark(g runGraph, req MarkRequest) ([]MarkedTI, error) {
	if g.nodes[req.TaskID] == nil {
		return nil, fmt.Errorf("task_id: %q: %w", req.TaskID, errNotInRun(req.RunID, g))
	}
	sel := map[string]bool{req.TaskID: true}
	if req.Downstream {
		sel = g.closure(sel, g.downstream)
	}
	var busy []string
	var out []MarkedTI
	for _, id := range g.inOrder(sel) {
		n := g.nodes[id]
		switch {
		case n.state.Dispatched():
			busy = append(busy, fmt.Sprintf("%s is %s (try %d)", id, n.state, n.tryNumber))
		case markable(req.To)(n.state):
			out = append(out, MarkedTI{TaskID: id, State: n.state})
		}
	}
	if len(busy) > 0 {
		return nil, fmt.Errorf("task instances of run %d an agent holds cannot be marked: %s; wait for them to end, or cancel the run: %w",
			req.RunID, strings.Join(busy, ", "), ErrConflict)
	}
	return out, nil
}

// MarkTI sets the TIs req selects (planMark) to req.To in one
// transaction, with reason marked and a ti_marked event naming req.Actor
// and req.Reason; its dependents then proceed as if they had ended so:
// the dependents the scheduler ended by their trigger rule (upstream_failed,
// or skipped by the rule) that the new state may decide otherwise return
// to none (runGraph.reopenable) and are judged again; marked failed, the
// scheduler makes its all_success dependents upstream_failed. An ended run
// returns to running (reopenRunTx) and the scheduler finalizes it again,
// so a mark may end it with another state.
// Errors: ErrNotFound (run or task); ErrConflict for a queued or
// cancelled run, or naming each selected TI that is queued or running;
// an error naming req.To when it is neither success nor failed.
func (s *Store) MarkTI(ctx context.Context, req MarkRequest) (MarkResult, error) {
	m := moveMarkSuccess
	switch req.To {
	case state.TISuccess:
	case state.TIFailed:
		m = moveMarkFailed
	default:
		return MarkResult{}, fmt.Errorf("mark run %d task %s: state: %q is neither success nor failed", req.RunID, req.TaskID, req.To)
	}
	var res MarkResult
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		cur, err := lockRunTx(ctx, tx, req.RunID, "marked")
		if err != nil {
			return err
		}
		g, err := loadRunGraphTx(ctx, tx, req.RunID)
		if err != nil {
			return err
		}
		if res.Marked, err = planMark(g, req); err != nil || len(res.Marked) == 0 {
			return err
		}
		if err := markTx(ctx, tx, g, m, req, res.Marked); err != nil {
			return err
		}
		roots := map[string]bool{}
		for _, t := range res.Marked {
			roots[t.TaskID] = true
			g.nodes[t.TaskID].state = req.To
		}
		res.Reopened = g.inOrder(g.reopenable(roots, req.To))
		msg := fmt.Sprintf("upstream %s marked %s by %s: dependencies are re-derived", req.TaskID, req.To, req.Actor)
		if _, err := reopenTx(ctx, tx, moveClear, g.ids(res.Reopened), msg); err != nil {
			return err
		}
		return reopenRunTx(ctx, tx, req.RunID, cur, fmt.Sprintf("%s marked %s by %s", req.TaskID, req.To, req.Actor))
	})
	if err != nil {
		return MarkResult{}, fmt.Errorf("mark run %d task %s %s: %w", req.RunID, req.TaskID, req.To, err)
	}
	d, err := s.GetRun(ctx, req.RunID)
	res.Run = d.Run
	return res, err
}

// markTx writes a planned mark: each TI to m's state with reason marked,
// ended now, and its ti_marked event.
func markTx(ctx context.Context, tx pgx.Tx, g runGraph, m move, req MarkRequest, marked []MarkedTI) error {
	ids := make([]int64, len(marked))
	msgs := make([]string, len(marked))
	why := ""
	if req.Reason != "" {
		why = ": " + req.Reason
	}
	for i, t := range marked {
		ids[i] = g.nodes[t.TaskID].id
		msgs[i] = fmt.Sprintf("marked %s by %s (was %s)%s", req.To, req.Actor, t.State, why)
	}
	tag, err := tx.Exec(ctx, `
		WITH x AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS m(id, msg)),
		u AS (
		  UPDATE task_instances t
		     SET state = `+m.To()+`, reason = $3, message = x.msg, end_date = now(), next_retry_at = NULL, updated_at = now()
		    FROM x WHERE t.id = x.id AND t.state IN `+m.From()+`
		  RETURNING t.id, t.run_id, t.task_id, t.try_number, t.attempt_id, t.agent_id, x.msg)
		INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
		SELECT run_id, id, task_id, try_number, attempt_id, agent_id, $4, msg FROM u`,
		ids, msgs, string(state.ReasonMarked), string(state.EventTIMarked))
	if err != nil {
		return err
	}
	if n := int(tag.RowsAffected()); n != len(ids) {
		// scheduled and up_for_retry move without the run lock (a claim's
		// queueing does take it; the retry-due step does not).
		return fmt.Errorf("marked %d of %d task instances: another write moved one meanwhile; try again: %w", n, len(ids), ErrConflict)
	}
	return nil
}

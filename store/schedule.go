package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/trigger"
)

// The scheduler's steps (docs/design.md §5), incremental: a pass works only on the
// runs whose rows changed, taken from run_dirty, plus the retries that
// fell due (adr/0011-incremental-scheduler.md). Each pass is one fenced
// transaction. The reconcile safety net runs the same per-run steps over
// every live run in keyset batches.

// TickResult counts what one scheduling pass did.
type TickResult struct {
	Runs      int // dirty (or reconciled) runs looked at
	Started   int // queued -> running runs
	Resolved  int // none -> upstream_failed or skipped TIs: their trigger rule can never be met
	Scheduled int // none TIs found ready: to scheduled, or straight to queued
	Retried   int // up_for_retry -> scheduled TIs
	Queued    int // scheduled or ready TIs -> queued
	Finalized int // runs ended success or failed
	Idle      int // runs newly marked idle (orphan suspects)
	// More reports, for one SchedulePass, that dirty runs were left
	// beyond its PassLimit; Add keeps the last pass's.
	More bool
}

// Moved is the number of rows the pass changed.
func (r TickResult) Moved() int {
	return r.Started + r.Resolved + r.Scheduled + r.Retried + r.Queued + r.Finalized + r.Idle
}

// Add sums o into r.
func (r *TickResult) Add(o TickResult) {
	r.Runs += o.Runs
	r.Started += o.Started
	r.Resolved += o.Resolved
	r.Scheduled += o.Scheduled
	r.Retried += o.Retried
	r.Queued += o.Queued
	r.Finalized += o.Finalized
	r.Idle += o.Idle
	r.More = o.More
}

// markDirtySQL appends a run to the scheduler's queue and wakes the
// leader; every change a tick must look at runs it in the change's own
// transaction. The constant payload lets PostgreSQL fold repeats.
const markDirtySQL = `WITH d AS (INSERT INTO run_dirty (run_id) VALUES ($1)) SELECT pg_notify('` + ChanScheduler + `', '')`

func markDirty(ctx context.Context, tx pgx.Tx, runID int64) error {
	_, err := tx.Exec(ctx, markDirtySQL, runID)
	return err
}

// ScheduleDirty is SchedulePass bounded by limit runs and no TI budget.
func (s *Store) ScheduleDirty(ctx context.Context, epoch int64, limit int) (TickResult, error) {
	return s.SchedulePass(ctx, epoch, PassLimit{Runs: limit})
}

// SchedulePass runs one incremental pass under epoch: due retries go back
// to scheduled (their runs become dirty), then the dirty runs, oldest
// change first, within lim (at least one; see PassLimit for Skip and
// Only), are started, resolved, queued
// within their max_active_tasks and finalized. An idle pass reads only the
// empty queue and the due end of an index, whatever the history or the
// number of live runs. A failure after the runs were taken is a
// *PassError naming them.
func (s *Store) SchedulePass(ctx context.Context, epoch int64, lim PassLimit) (TickResult, error) {
	var res TickResult
	var ids []int64
	err := s.LeaderTx(ctx, epoch, func(tx Tx) error {
		tag, err := tx.Exec(ctx, `
			WITH r AS (
			  UPDATE task_instances SET state = `+moveRetryDue.To()+`, next_retry_at = NULL, updated_at = now()
			   WHERE state IN `+moveRetryDue.From()+` AND next_retry_at <= now() RETURNING run_id)
			INSERT INTO run_dirty (run_id) SELECT DISTINCT run_id FROM r`)
		if err != nil {
			return err
		}
		res.Retried = int(tag.RowsAffected()) // distinct runs; close enough for a log line
		rows, err := tx.Query(ctx, runWidthSQL(`
			SELECT run_id, min(id) AS k FROM run_dirty
			 WHERE run_id <> ALL ($3) AND (cardinality($4::bigint[]) = 0 OR run_id = ANY ($4))
			 GROUP BY run_id ORDER BY k LIMIT $1`),
			max(lim.Runs, 1), widthCap(lim), nonNil(lim.Skip), nonNil(lim.Only))
		if err != nil {
			return err
		}
		var more bool
		if ids, more, err = takeWithin(rows, lim.TIs); err != nil || len(ids) == 0 {
			return err
		}
		more = more || len(ids) == max(lim.Runs, 1)
		if _, err := tx.Exec(ctx, `DELETE FROM run_dirty WHERE run_id = ANY ($1)`, ids); err != nil {
			return err
		}
		if f := s.signals.PassTaken; f != nil {
			if err := f(ctx, tx, ids); err != nil {
				return err
			}
		}
		r, err := scheduleRunsTx(ctx, tx, ids)
		r.Retried, r.More = res.Retried, more
		res = r
		return err
	})
	if err != nil {
		if len(ids) > 0 {
			err = &PassError{RunIDs: ids, Err: err}
		}
		return TickResult{}, fmt.Errorf("schedule: %w", err)
	}
	return res, nil
}

// ReconcileRuns is the safety net's step: it runs the scheduler's per-run
// steps over the live runs with id > after that have no pending dirty row
// (those are the tick's), in id order within lim, and returns what moved
// and the last id looked at (0 when the keyset is exhausted). Anything it
// moves is work the incremental path missed.
func (s *Store) ReconcileRuns(ctx context.Context, epoch, after int64, lim PassLimit) (TickResult, int64, error) {
	var res TickResult
	var last int64
	runs := max(lim.Runs, 1)
	err := s.LeaderTx(ctx, epoch, func(tx Tx) error {
		rows, err := tx.Query(ctx, runWidthSQL(`
			SELECT r.id AS run_id, r.id AS k FROM runs r
			 WHERE r.state IN `+runLiveSQL+` AND r.id > $3
			   AND NOT EXISTS (SELECT 1 FROM run_dirty d WHERE d.run_id = r.id)
			 ORDER BY r.id LIMIT $1`), runs, widthCap(lim), after)
		if err != nil {
			return err
		}
		ids, more, err := takeWithin(rows, lim.TIs)
		if err != nil || len(ids) == 0 {
			return err
		}
		if more || len(ids) == runs {
			last = ids[len(ids)-1]
		}
		res, err = scheduleRunsTx(ctx, tx, ids)
		return err
	})
	if err != nil {
		return TickResult{}, 0, fmt.Errorf("reconcile runs: %w", err)
	}
	return res, last, nil
}

// StartQueuedRuns starts every queued run (through runs_queued_idx) and
// marks it dirty; a fenced write that leader tests use on its own.
func (s *Store) StartQueuedRuns(ctx context.Context, epoch int64) (int, error) {
	var n int
	err := s.LeaderTx(ctx, epoch, func(tx Tx) error {
		rows, err := tx.Query(ctx, `SELECT id FROM runs WHERE state = 'queued' ORDER BY id`)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(ids) == 0 {
			return err
		}
		n, err = startRunsTx(ctx, tx, ids)
		if err == nil {
			_, err = tx.Exec(ctx, `INSERT INTO run_dirty (run_id) SELECT unnest($1::bigint[])`, ids)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("start queued runs: %w", err)
	}
	return n, nil
}

// scheduleRunsTx is the per-run pass shared by the tick and the reconcile:
// it locks the live runs among ids (run before TIs, the order cancels and
// late completions use), then runs each step over just those runs.
func scheduleRunsTx(ctx context.Context, tx pgx.Tx, ids []int64) (TickResult, error) {
	var res TickResult
	rows, err := tx.Query(ctx, `
		SELECT id FROM runs WHERE id = ANY ($1) AND state IN `+runLiveSQL+`
		 ORDER BY id FOR NO KEY UPDATE`, ids)
	if err != nil {
		return res, err
	}
	live, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(live) == 0 {
		return res, err
	}
	res.Runs = len(live)
	steps := []struct {
		n  *int
		fn func(context.Context, pgx.Tx, []int64) (int, error)
	}{
		{&res.Started, startRunsTx},
		{&res.Resolved, resolveTx},
		{&res.Queued, func(ctx context.Context, tx pgx.Tx, ids []int64) (queued int, err error) {
			res.Scheduled, queued, err = scheduleAndQueueTx(ctx, tx, ids)
			return queued, err
		}},
		{&res.Finalized, finalizeRunsTx},
		{&res.Idle, markIdleTx},
		{new(int), wakeHeldTx},
	}
	for _, st := range steps {
		if *st.n, err = st.fn(ctx, tx, live); err != nil {
			return res, err
		}
	}
	return res, nil
}

func execCount(ctx context.Context, tx pgx.Tx, sql string, args ...any) (int, error) {
	tag, err := tx.Exec(ctx, sql, args...)
	return int(tag.RowsAffected()), err
}

// startRunsTx moves the queued runs among ids to running (step 1), oldest
// first within each DAG and only while the DAG's running runs stay within
// its max_active_runs (the rest wait in queued; docs/schedules.md), and
// arms their run timeout from the start. The rows of capped DAGs are
// locked first, so concurrent passes cannot both take the last place; the
// running count reads runs_active_idx.
func startRunsTx(ctx context.Context, tx pgx.Tx, ids []int64) (int, error) {
	_, err := tx.Exec(ctx, `
		SELECT 1 FROM dags d
		 WHERE d.max_active_runs IS NOT NULL
		   AND d.dag_id IN (SELECT dag_id FROM runs WHERE id = ANY ($1) AND state = 'queued')
		 ORDER BY d.dag_id FOR NO KEY UPDATE OF d`, ids)
	if err != nil {
		return 0, err
	}
	return execCount(ctx, tx, `
		WITH cand AS (
		  SELECT r.id, r.dag_id, row_number() OVER (PARTITION BY r.dag_id ORDER BY r.id) AS rn
		    FROM runs r WHERE r.id = ANY ($1) AND r.state = 'queued'),
		pick AS (
		  SELECT c.id FROM cand c JOIN dags d ON d.dag_id = c.dag_id
		   WHERE d.max_active_runs IS NULL
		      OR c.rn <= d.max_active_runs - (SELECT count(*) FROM runs x
		                                       WHERE x.dag_id = c.dag_id AND x.state IN `+runLiveSQL+`
		                                         AND x.state = 'running')),
		s AS (
		  UPDATE runs SET state = 'running', start_date = now(), updated_at = now(),
		         deadline_at = now() + timeout
		    FROM pick WHERE runs.id = pick.id AND runs.state = 'queued' RETURNING runs.id)
		INSERT INTO events (run_id, kind, message) SELECT id, 'run_started', 'run started' FROM s`, ids)
}

// wakeHeldTx marks dirty the oldest queued runs of capped DAGs among
// whose runs in ids one has ended, up to the DAG's max_active_runs: a
// place may have opened for a run that startRunsTx held.
func wakeHeldTx(ctx context.Context, tx pgx.Tx, ids []int64) (int, error) {
	return execCount(ctx, tx, `
		INSERT INTO run_dirty (run_id)
		SELECT q.id FROM dags d
		  JOIN LATERAL (SELECT id FROM runs q WHERE q.dag_id = d.dag_id AND q.state = 'queued'
		                 ORDER BY q.id LIMIT d.max_active_runs) q ON true
		 WHERE d.max_active_runs IS NOT NULL
		   AND d.dag_id IN (SELECT dag_id FROM runs WHERE id = ANY ($1) AND state IN `+runTerminalSQL+`)`, ids)
}

// resolveSQL ends the none TIs of the given runs whose trigger rule can
// never be met (docs/trigger-rules.md): upstream_failed with reason
// upstream_failed, naming the upstreams that failed, or skipped with
// reason trigger_rule, naming the rule and the upstreams' ends. Each TI
// is judged once, by decisionSQL, probing only its own upstreams by key
// (as scheduleQueueSQL does); the updates find their rows by primary key.
var resolveSQL = `
	WITH d AS MATERIALIZED (
	  SELECT id, d FROM (
	    SELECT ti.id, ` + decisionSQL + ` AS d
	      FROM task_instances ti, runs r
	     WHERE ti.run_id = ANY ($1) AND r.id = ti.run_id AND r.state = 'running' AND ti.state = 'none') x
	   WHERE d IN (` + decisionSQLValue(trigger.UpstreamFailed) + `, ` + decisionSQLValue(trigger.Skip) + `)),
	f AS (
	  UPDATE task_instances ti
	     SET state = ` + moveUpstreamFailed.To() + `, reason = 'upstream_failed', end_date = now(), updated_at = now(),
	         message = 'upstream failed: ' || ` + upstreamEndsSQL(tiFailsDependentsSQL) + `
	   WHERE ti.id = ANY (ARRAY (SELECT id FROM d WHERE d.d = ` + decisionSQLValue(trigger.UpstreamFailed) + `))
	     AND ti.state || '' IN ` + moveUpstreamFailed.From() + `
	  RETURNING ti.id, ti.run_id, ti.task_id, ti.try_number, ti.message, ti.state),
	k AS (
	  UPDATE task_instances ti
	     SET state = ` + moveTriggerSkipped.To() + `, reason = 'trigger_rule', end_date = now(), updated_at = now(),
	         message = 'trigger rule ' || ti.trigger_rule || ' can never be met: ' || ` + upstreamEndsSQL(tiTerminalSQL) + `
	   WHERE ti.id = ANY (ARRAY (SELECT id FROM d WHERE d.d = ` + decisionSQLValue(trigger.Skip) + `))
	     AND ti.state || '' IN ` + moveTriggerSkipped.From() + `
	  RETURNING ti.id, ti.run_id, ti.task_id, ti.try_number, ti.message, ti.state)
	INSERT INTO events (run_id, ti_id, task_id, try_number, kind, message)
	SELECT run_id, id, task_id, try_number,
	       CASE WHEN state = 'skipped' THEN '` + string(state.EventTISkipped) + `' ELSE '` + string(state.EventTIUpstreamFailed) + `' END,
	       message
	  FROM (SELECT * FROM f UNION ALL SELECT * FROM k) x`

// upstreamEndsSQL lists the upstreams of the TI aliased ti whose state is
// in the SQL list states, as "extract failed, load skipped", in
// declaration order.
func upstreamEndsSQL(states string) string {
	return `coalesce((SELECT string_agg(up.task_id || ' ' || up.state, ', ' ORDER BY up.ordinal)
	           FROM task_instances up
	          WHERE up.run_id = ti.run_id AND up.task_id = ANY (ti.upstream) AND up.state IN ` + states + `), 'none ended')`
}

// resolveTx applies resolveSQL to the runs until it ends nothing more
// (each round goes one level deeper in the DAG: a TI it ended is an
// upstream of the next round's) and returns the TIs it ended.
func resolveTx(ctx context.Context, tx pgx.Tx, ids []int64) (int, error) {
	total := 0
	for {
		n, err := execCount(ctx, tx, resolveSQL, ids)
		if err != nil || n == 0 {
			return total, err
		}
		total += n
	}
}

// maxQueuedPayload bounds a ChanQueued payload, in bytes, below
// PostgreSQL's 8000-byte NOTIFY limit; a longer list is sent as "" (wake
// every long-poll).
const maxQueuedPayload = 7900

// QueuedPayload decodes a ChanQueued notification: the distinct
// required_tags arrays of the TIs just queued, a JSON array of string
// arrays. ok is false for "" (too many to list, or the listener's
// reconnect wake-up) or an unreadable payload: every long-poll must then
// look.
func QueuedPayload(payload string) (sets [][]string, ok bool) {
	if payload == "" || json.Unmarshal([]byte(payload), &sets) != nil {
		return nil, false
	}
	return sets, true
}

// finalizeRunsTx ends the given running runs whose TIs are all terminal:
// success when every TI succeeded or was skipped, else failed with the
// reason of the first failed TI (step 5). A run with a TI left in a
// state ti_live_idx or ti_pending_idx holds is skipped after one probe
// of each, before its TIs are read: a wide run is dirty after each batch
// of its completions, and reading all its TIs each pass cost most of
// this statement in `make bench`.
func finalizeRunsTx(ctx context.Context, tx pgx.Tx, ids []int64) (int, error) {
	return execCount(ctx, tx, `
		WITH fin AS (
		  SELECT r.id, bool_and(t.state IN `+tiDoneSQL+`) AS ok
		    FROM runs r JOIN task_instances t ON t.run_id = r.id
		   WHERE r.id = ANY ($1) AND r.state = 'running'
		     AND NOT EXISTS (SELECT 1 FROM task_instances x WHERE x.run_id = r.id
		                      AND x.state IN `+tiActiveSQL+`)
		     AND NOT EXISTS (SELECT 1 FROM task_instances x WHERE x.run_id = r.id AND x.state = 'none')
		   GROUP BY r.id
		  HAVING bool_and(t.state IN `+tiTerminalSQL+`)),
		culprit AS (
		  SELECT DISTINCT ON (t.run_id) t.run_id, t.task_id, t.state, t.reason
		    FROM task_instances t JOIN fin ON fin.id = t.run_id AND NOT fin.ok
		   WHERE t.state IN `+tiCulpritSQL+`
		   ORDER BY t.run_id, t.end_date NULLS LAST, t.ordinal),
		upd AS (
		  UPDATE runs r
		     SET state = CASE WHEN fin.ok THEN 'success' ELSE 'failed' END,
		         reason = CASE WHEN fin.ok THEN NULL ELSE coalesce(c.reason, 'upstream_failed') END,
		         message = CASE WHEN fin.ok THEN 'all tasks succeeded or were skipped'
		                   ELSE 'task ' || coalesce(c.task_id, '?') || ' ' || coalesce(c.state, 'failed') ||
		                        coalesce(' (' || c.reason || ')', '') END,
		         end_date = now(), updated_at = now(), idle_since = NULL
		    FROM fin LEFT JOIN culprit c ON c.run_id = fin.id
		   WHERE r.id = fin.id AND r.state = 'running'
		  RETURNING r.id, r.state, r.message)
		INSERT INTO events (run_id, kind, message)
		SELECT id, CASE WHEN state = 'success' THEN 'run_success' ELSE 'run_failed' END, message FROM upd`, ids)
}

// markIdleTx records, on the given running runs, whether any TI is still
// active: idle_since is set when none is (an orphan suspect: nothing the
// scheduler can do will move the run) and cleared otherwise. Rows are only
// written when the mark changes.
func markIdleTx(ctx context.Context, tx pgx.Tx, ids []int64) (int, error) {
	var n int
	err := tx.QueryRow(ctx, `
		WITH u AS (
		  UPDATE runs r SET idle_since = CASE WHEN x.live THEN NULL ELSE now() END
		    FROM (SELECT r2.id, EXISTS (SELECT 1 FROM task_instances t WHERE t.run_id = r2.id
		                 AND t.state IN `+tiActiveSQL+`) AS live
		            FROM runs r2 WHERE r2.id = ANY ($1) AND r2.state = 'running') x
		   WHERE r.id = x.id AND (x.live = (r.idle_since IS NOT NULL))
		  RETURNING x.live)
		SELECT count(*) FILTER (WHERE NOT live) FROM u`, ids).Scan(&n)
	return n, err
}

// leaderExec runs one statement in a fenced transaction and returns the
// rows it affected.
func (s *Store) leaderExec(ctx context.Context, epoch int64, what, sql string, args ...any) (int, error) {
	var n int
	err := s.LeaderTx(ctx, epoch, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, sql, args...)
		n = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return n, nil
}

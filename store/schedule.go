package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The scheduler's steps (DESIGN §5). Each is leader-only, runs in its own
// short fenced transaction (LeaderTx) and returns how many rows it moved.

// StartQueuedRuns moves queued runs to running (step 1).
func (s *Store) StartQueuedRuns(ctx context.Context, epoch int64) (int, error) {
	return s.leaderExec(ctx, epoch, "start queued runs", `
		WITH s AS (
		  UPDATE runs SET state = 'running', start_date = now(), updated_at = now()
		   WHERE state = 'queued' RETURNING id)
		INSERT INTO events (run_id, kind, message) SELECT id, 'run_started', 'run started' FROM s`)
}

// upstreamFailedSQL marks a 'none' TI upstream_failed when an upstream
// failed, was cancelled, or is itself upstream_failed (trigger rule
// all_success).
const upstreamFailedSQL = `
	WITH u AS (
	  UPDATE task_instances ti
	     SET state = 'upstream_failed', reason = 'upstream_failed', end_date = now(), updated_at = now(),
	         message = 'upstream failed: ' || (
	           SELECT string_agg(up.task_id || ' ' || up.state, ', ' ORDER BY up.ordinal)
	             FROM task_instances up
	            WHERE up.run_id = ti.run_id AND up.task_id = ANY (ti.upstream)
	              AND up.state IN ('failed', 'upstream_failed', 'cancelled'))
	    FROM runs r
	   WHERE r.id = ti.run_id AND r.state = 'running' AND ti.state = 'none'
	     AND EXISTS (SELECT 1 FROM task_instances up
	                  WHERE up.run_id = ti.run_id AND up.task_id = ANY (ti.upstream)
	                    AND up.state IN ('failed', 'upstream_failed', 'cancelled'))
	  RETURNING ti.id, ti.run_id, ti.task_id, ti.try_number, ti.message)
	INSERT INTO events (run_id, ti_id, task_id, try_number, kind, message)
	SELECT run_id, id, task_id, try_number, 'ti_upstream_failed', message FROM u`

// ResolveDependencies propagates upstream_failed to a fixed point, then
// moves 'none' TIs whose upstreams all succeeded (or were skipped) to
// scheduled (step 2).
func (s *Store) ResolveDependencies(ctx context.Context, epoch int64) (failed, scheduled int, err error) {
	err = s.LeaderTx(ctx, epoch, func(tx pgx.Tx) error {
		for {
			tag, err := tx.Exec(ctx, upstreamFailedSQL)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				break
			}
			failed += int(tag.RowsAffected())
		}
		tag, err := tx.Exec(ctx, `
			UPDATE task_instances ti SET state = 'scheduled', updated_at = now()
			  FROM runs r
			 WHERE r.id = ti.run_id AND r.state = 'running' AND ti.state = 'none'
			   AND NOT EXISTS (SELECT 1 FROM task_instances up
			                    WHERE up.run_id = ti.run_id AND up.task_id = ANY (ti.upstream)
			                      AND up.state NOT IN ('success', 'skipped'))`)
		scheduled = int(tag.RowsAffected())
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("resolve dependencies: %w", err)
	}
	return failed, scheduled, nil
}

// QueueScheduled moves scheduled TIs to queued, oldest run first, while
// each DAG stays within max_active_tasks queued+running TIs; it stamps
// queued_at and wakes claim long-polls (step 3).
func (s *Store) QueueScheduled(ctx context.Context, epoch int64) (int, error) {
	var n int
	err := s.LeaderTx(ctx, epoch, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			WITH active AS (
			  SELECT dag_id, count(*) AS n FROM task_instances
			   WHERE state IN ('queued', 'running') GROUP BY dag_id),
			cand AS (
			  SELECT ti.id, ti.dag_id,
			         row_number() OVER (PARTITION BY ti.dag_id ORDER BY ti.run_id, ti.ordinal) AS rn
			    FROM task_instances ti WHERE ti.state = 'scheduled'),
			pick AS (
			  SELECT c.id FROM cand c JOIN dags d ON d.dag_id = c.dag_id
			    LEFT JOIN active a ON a.dag_id = c.dag_id
			   WHERE c.rn <= d.max_active_tasks - coalesce(a.n, 0)),
			q AS (
			  UPDATE task_instances t SET state = 'queued', queued_at = now(), updated_at = now()
			    FROM pick WHERE t.id = pick.id AND t.state = 'scheduled' RETURNING t.id)
			SELECT count(*) FROM q`).Scan(&n)
		if err != nil || n == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, ChanQueued, fmt.Sprint(n))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("queue scheduled: %w", err)
	}
	return n, nil
}

// RequeueDueRetries moves up_for_retry TIs whose next_retry_at has passed
// back to scheduled (step 4).
func (s *Store) RequeueDueRetries(ctx context.Context, epoch int64) (int, error) {
	return s.leaderExec(ctx, epoch, "requeue due retries", `
		UPDATE task_instances SET state = 'scheduled', next_retry_at = NULL, updated_at = now()
		 WHERE state = 'up_for_retry' AND next_retry_at <= now()`)
}

// FinalizeRuns ends running runs whose TIs are all terminal: success when
// every TI succeeded or was skipped, else failed with the reason of the
// first failed TI (step 5).
func (s *Store) FinalizeRuns(ctx context.Context, epoch int64) (int, error) {
	return s.leaderExec(ctx, epoch, "finalize runs", `
		WITH fin AS (
		  SELECT r.id, r.updated_at, bool_and(t.state IN ('success', 'skipped')) AS ok
		    FROM runs r JOIN task_instances t ON t.run_id = r.id
		   WHERE r.state = 'running'
		   GROUP BY r.id
		  HAVING bool_and(t.state IN `+tiTerminalSQL+`)),
		culprit AS (
		  SELECT DISTINCT ON (t.run_id) t.run_id, t.task_id, t.state, t.reason
		    FROM task_instances t JOIN fin ON fin.id = t.run_id AND NOT fin.ok
		   WHERE t.state IN ('failed', 'cancelled')
		   ORDER BY t.run_id, t.end_date NULLS LAST, t.ordinal),
		upd AS (
		  UPDATE runs r
		     SET state = CASE WHEN fin.ok THEN 'success' ELSE 'failed' END,
		         reason = CASE WHEN fin.ok THEN NULL ELSE coalesce(c.reason, 'upstream_failed') END,
		         message = CASE WHEN fin.ok THEN 'all tasks succeeded or were skipped'
		                   ELSE 'task ' || coalesce(c.task_id, '?') || ' ' || coalesce(c.state, 'failed') ||
		                        coalesce(' (' || c.reason || ')', '') END,
		         end_date = now(), updated_at = now()
		    FROM fin LEFT JOIN culprit c ON c.run_id = fin.id
		   WHERE r.id = fin.id AND r.state = 'running'
		     AND r.updated_at = fin.updated_at -- a late completion touched the run: next tick
		  RETURNING r.id, r.state, r.message)
		INSERT INTO events (run_id, kind, message) SELECT id, 'run_' || state, message FROM upd`)
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

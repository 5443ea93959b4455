package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/trigger"
)

// scheduleQueueSQL is the scheduler's steps 2 and 3 (docs/design.md §5)
// in one statement: the none TIs of the given runs whose trigger rule is
// met (decisionSQL; docs/trigger-rules.md) become ready, and within each run's
// max_active_tasks (queued + running TIs of the run, the cap it
// snapshotted at trigger time; docs/scheduler-resilience.md) the ready
// and the already scheduled TIs are queued in declaration order; the
// ready ones that find no place become scheduled. A TI with a place is
// thus written once, none → queued, instead of once to scheduled and
// again to queued, each a non-HOT update with its index entries
// (docs/performance.md, "Fewer writes per TI"). Which TIs are queued is
// what the two steps in turn chose: the first `free` by ordinal among the
// scheduled and the ready TIs of the run. The statement stamps queued_at
// and wakes the claim long-polls that can take the new work: the
// ChanQueued payload is QueuedPayload. $1 the runs, $2 the payload's
// bound in bytes.
//
// Its shape keeps the cost linear in the runs' TIs whatever the plan
// cache settles on (docs/performance.md, "the queue step"):
//   - each TI reads only its own upstreams' states, by the (run_id,
//     task_id) key, the state compared outside that lookup so no other
//     index can serve it: a join of a run's TIs with each other costs the
//     square of the run's width (seconds at 1,000 TIs a run);
//   - each run's free places are counted once, by the run_id key, into a
//     materialized list, and each run then reads at most that many of its
//     scheduled TIs off ti_scheduled_idx (run_id, ordinal); a run with
//     nothing to queue (no scheduled TI, by one probe of
//     ti_scheduled_idx in its order, and none ready) is not counted, so
//     the passes of a burn-down, whose runs were all queued at their first
//     pass and are dirty from completions, read no active TI;
//   - the ready and the scheduled candidates are ranked once, by run;
//   - the updates find their rows by primary key from arrays, so no join
//     can be planned as a scan of task_instances; their state guards
//     compare the state joined to an empty string, so that no partial
//     index's predicate matches them (otherwise the planner ANDs the
//     key's bitmap with all of
//     ti_pending_idx, every pending TI of the database read each pass:
//     TestQueueStepSkipsRunsWithNothingToQueue). The form of the queue
//     step before (candidates numbered by row_number() and joined to a
//     grouped count of active TIs) took 868 ms a call in `make bench` on
//     1,000-TI runs over 1.2M TIs.
//
// No event records either transition, as before the fold: the claim's
// ti_claimed is a TI's first event after the trigger's run_queued.
var scheduleQueueSQL = `
	WITH ready AS MATERIALIZED (
	  SELECT ti.id, ti.run_id, ti.ordinal FROM task_instances ti, runs r
	   WHERE ti.run_id = ANY ($1) AND r.id = ti.run_id AND r.state = 'running' AND ti.state = 'none'
	     AND ` + decisionSQL + ` = ` + decisionSQLValue(trigger.Run) + `),
	room AS MATERIALIZED (
	  SELECT r.id, r.max_active_tasks - (
	           SELECT count(*) FROM task_instances a
	            WHERE a.run_id = r.id AND a.state IN ` + tiDispatchedSQL + `) AS free
	    FROM runs r WHERE r.id = ANY ($1) AND r.state = 'running'
	     AND (r.id IN (SELECT run_id FROM ready)
	          OR (SELECT s.id FROM task_instances s WHERE s.run_id = r.id AND s.state = 'scheduled'
	                ORDER BY s.ordinal LIMIT 1) IS NOT NULL)),
	waiting AS MATERIALIZED (
	  SELECT p.id, room.id AS run_id, p.ordinal FROM room
	   CROSS JOIN LATERAL (
	     SELECT ti.id, ti.ordinal FROM task_instances ti
	      WHERE ti.run_id = room.id AND ti.state = 'scheduled'
	      ORDER BY ti.ordinal LIMIT room.free) p
	   WHERE room.free > 0),
	ranked AS MATERIALIZED (
	  SELECT c.id, c.fresh, row_number() OVER (PARTITION BY c.run_id ORDER BY c.ordinal) <= room.free AS pick
	    FROM (SELECT id, run_id, ordinal, true AS fresh FROM ready
	          UNION ALL SELECT id, run_id, ordinal, false FROM waiting) c
	    JOIN room ON room.id = c.run_id),
	s AS (
	  UPDATE task_instances t SET state = ` + moveReadyScheduled.To() + `, updated_at = now()
	   WHERE t.id = ANY (ARRAY (SELECT id FROM ranked WHERE fresh AND NOT pick)) AND t.state || '' IN ` + moveReadyScheduled.From() + `),
	q AS (
	  UPDATE task_instances t SET state = ` + moveReadyQueued.To() + `, queued_at = now(), updated_at = now()
	   WHERE t.id = ANY (ARRAY (SELECT id FROM ranked WHERE pick)) AND t.state || '' IN ` + moveReadyQueued.From() + `
	  RETURNING t.required_tags),
	agg AS (
	  SELECT count(*) AS n, coalesce(jsonb_agg(DISTINCT to_jsonb(required_tags))::text, '[]') AS sets FROM q)
	SELECT (SELECT count(*) FROM ready), n, CASE WHEN n > 0 THEN
	          pg_notify('` + ChanQueued + `', CASE WHEN length(sets) <= $2 THEN sets ELSE '' END)::text END
	  FROM agg`

// scheduleAndQueueTx runs scheduleQueueSQL over the runs in ids and
// returns the TIs that became ready (scheduled or queued at once) and the
// TIs it queued (ready or scheduled before).
func scheduleAndQueueTx(ctx context.Context, tx pgx.Tx, ids []int64) (ready, queued int, err error) {
	err = tx.QueryRow(ctx, scheduleQueueSQL, ids, maxQueuedPayload).Scan(&ready, &queued, new(*string))
	return ready, queued, err
}

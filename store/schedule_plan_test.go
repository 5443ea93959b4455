package store_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/store"
)

// planWork is the rows every node of the plan produced or filtered out,
// times its loops: a count of the work done that does not depend on time.
func planWork(n planNode) float64 {
	var w float64
	n.walk(func(n planNode) { w += (n.Rows + n.Removed + n.JoinRemoved) * n.Loops })
	return w
}

// The upstream-failed and schedule-and-queue steps do work linear in the TIs of
// their runs, even right after a mass change the statistics have not seen
// (as after every trigger): joining a run's TIs with each other took
// seconds a pass at 1,000 TIs a run (812,000 rows of work here). Each statement runs for real
// under EXPLAIN ANALYZE, in order, in a transaction rolled back.
func TestSchedulingStepsAreLinearInRunWidth(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	const runs, width = 5, 400
	e.apply(wideDAG("w400", width))
	var ids []int64
	for range runs {
		ids = append(ids, e.trigger("w400"))
	}
	_, err := e.raw.Exec(e.ctx, `UPDATE runs SET state = 'running', start_date = now() WHERE id = ANY ($1)`, ids)
	require.NoError(t, err)
	_, err = e.raw.Exec(e.ctx, `ANALYZE`) // statistics from before the steps: every TI 'none'
	require.NoError(t, err)

	tx, err := e.raw.Begin(e.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(e.ctx) }()
	for _, st := range []struct {
		name string
		sql  string
		args []any
	}{
		{"resolve", store.ResolveSQLForTest, []any{ids}},
		{"schedule and queue", store.ScheduleQueueSQLForTest, []any{ids, store.MaxQueuedPayloadForTest}},
	} {
		var out []byte
		require.NoError(t, tx.QueryRow(e.ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+st.sql, st.args...).Scan(&out), st.name)
		var plan []struct {
			Plan planNode `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal(out, &plan), st.name)
		work := planWork(plan[0].Plan)
		t.Logf("%s: %.0f rows of work for %d TIs", st.name, work, runs*width)
		assert.LessOrEqual(t, work, float64(20*runs*width), "%s: work must be linear in the TIs, not their square", st.name)
	}
	var scheduled, queued int
	require.NoError(t, tx.QueryRow(e.ctx, `SELECT count(*) FILTER (WHERE state = 'scheduled'), count(*) FILTER (WHERE state = 'queued')
		FROM task_instances WHERE run_id = ANY ($1)`, ids).Scan(&scheduled, &queued))
	assert.Equal(t, runs*dag.DefaultMaxActiveTasks, queued, "each run queued up to its max_active_tasks")
	assert.Equal(t, runs*width-queued, scheduled, "every other TI without upstreams was scheduled")
}

// The queue step does work linear in the TIs of its runs under either
// plan PostgreSQL may settle a prepared statement on: pgx prepares every
// statement, and after five executions the generic plan, blind to $1's
// runs, may replace the custom one. Runs of 400 TIs, a quarter already
// queued or running and the rest scheduled, as in a burn-down: a form
// that recounted a run's active TIs per candidate did work in the square
// of the width (~1.3 s a call on 1,000-TI runs in `make bench`). Each
// mode runs the statement for real under EXPLAIN ANALYZE in a transaction
// rolled back, and must queue every scheduled TI (max_active_tasks 10000).
func TestQueueStepIsLinearInRunWidth(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	const runs, width = 5, 400
	ids := e.runningWide("q400", runs, width, `state = CASE ordinal % 8 WHEN 0 THEN 'queued' WHEN 1 THEN 'running' ELSE 'scheduled' END,
		queued_at = CASE WHEN ordinal % 8 < 2 THEN now() END`)
	_, err := e.raw.Exec(e.ctx, `ANALYZE`)
	require.NoError(t, err)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		tx, err := e.raw.Begin(e.ctx)
		require.NoError(t, err)
		_, err = tx.Exec(e.ctx, `SET LOCAL plan_cache_mode = `+mode)
		require.NoError(t, err)
		var out []byte
		require.NoError(t, tx.QueryRow(e.ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+store.ScheduleQueueSQLForTest,
			ids, store.MaxQueuedPayloadForTest).Scan(&out), mode)
		var plan []struct {
			Plan planNode `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal(out, &plan), mode)
		work := planWork(plan[0].Plan)
		var seq int
		plan[0].Plan.walk(func(n planNode) {
			if n.NodeType == "Seq Scan" && n.RelationName == "task_instances" {
				seq++
			}
		})
		var queued int
		require.NoError(t, tx.QueryRow(e.ctx, `SELECT count(*) FROM task_instances WHERE run_id = ANY ($1) AND state = 'queued'`, ids).Scan(&queued))
		require.NoError(t, tx.Rollback(e.ctx))
		t.Logf("queue step, %s: %.0f rows of work for %d TIs", mode, work, runs*width)
		assert.LessOrEqual(t, work, float64(20*runs*width), "%s: work must be linear in the TIs, not their square", mode)
		assert.Zero(t, seq, "%s: the queue step scans task_instances sequentially: %s", mode, out)
		assert.Equal(t, runs*width*7/8, queued, "%s: every scheduled TI is queued beside the queued quarter", mode)
	}
}

// A pass over runs with nothing to queue (every TI queued or running, as
// in a burn-down whose runs were all queued at their first pass and are
// dirty from completions) does not count their active TIs, nor read the
// pending TIs of other runs: the schedule and queue statement's work is a
// few probes a run, not the runs' width.
func TestQueueStepSkipsRunsWithNothingToQueue(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	const runs, width = 5, 400
	ids := e.runningWide("full400", runs, width, `state = CASE ordinal % 2 WHEN 0 THEN 'queued' ELSE 'running' END, queued_at = now()`)
	// A run outside the pass keeps its TIs 'none', as the live runs of any
	// busy database do: with no pending TI anywhere, PostgreSQL would skip
	// the statement's work without looking at the runs at all.
	e.trigger("full400")
	// Vacuumed, so that ti_pending_idx no longer holds the entries of the
	// TIs' 'none' versions: until a vacuum, finding the runs' ready TIs
	// reads them (and did before the steps were folded).
	_, err := e.raw.Exec(e.ctx, `VACUUM ANALYZE task_instances`)
	require.NoError(t, err)
	tx, err := e.raw.Begin(e.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(e.ctx) }()
	var out []byte
	require.NoError(t, tx.QueryRow(e.ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+store.ScheduleQueueSQLForTest,
		ids, store.MaxQueuedPayloadForTest).Scan(&out))
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(out, &plan))
	work := planWork(plan[0].Plan)
	t.Logf("schedule and queue over %d runs with nothing to queue: %.0f rows of work", runs, work)
	assert.LessOrEqual(t, work, float64(10*runs), "the runs' %d active TIs were read", runs*width)
}

// runningWide applies a DAG of width independent tasks with
// max_active_tasks 10000, triggers runs of it, starts them and sets
// their TIs' columns with set (an UPDATE's SET list), as a burn-down
// leaves them; it returns the runs.
func (e *schedEnv) runningWide(dagID string, runs, width int, set string) []int64 {
	e.apply(strings.Replace(wideDAG(dagID, width), "tasks:", "max_active_tasks: 10000\ntasks:", 1))
	var ids []int64
	for range runs {
		ids = append(ids, e.trigger(dagID))
	}
	_, err := e.raw.Exec(e.ctx, `
		WITH r AS (UPDATE runs SET state = 'running', start_date = now() WHERE id = ANY ($1))
		UPDATE task_instances SET `+set+` WHERE run_id = ANY ($1)`, ids)
	require.NoError(e.t, err)
	return ids
}

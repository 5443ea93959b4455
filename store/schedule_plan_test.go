package store_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
)

// planWork is the rows every node of the plan produced or filtered out,
// times its loops: a count of the work done that does not depend on time.
func planWork(n planNode) float64 {
	var w float64
	n.walk(func(n planNode) { w += (n.Rows + n.Removed + n.JoinRemoved) * n.Loops })
	return w
}

// The upstream-failed and schedule steps do work linear in the TIs of
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
		{"upstream_failed", store.UpstreamFailedSQLForTest, []any{ids}},
		{"schedule", store.ScheduleReadySQLForTest, []any{ids}},
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
	var scheduled int
	require.NoError(t, tx.QueryRow(e.ctx, `SELECT count(*) FROM task_instances WHERE run_id = ANY ($1) AND state = 'scheduled'`, ids).Scan(&scheduled))
	assert.Equal(t, runs*width, scheduled, "every TI without upstreams was scheduled")
}

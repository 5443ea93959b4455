package scheduler

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/metrics"
)

// The reconcile repairs a run whose scheduler mark was lost and counts
// what it moved as reconcile_repaired; a healthy system counts nothing.
func TestReconcileCountsWhatTheTickMissed(t *testing.T) {
	t.Parallel()
	s, st := newScheduler(t, Config{})
	ctx := context.Background()
	raw, err := pgxpool.New(ctx, st.URL())
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, st.AcquireFence(ctx, 1, "t"))
	spec, err := dag.Parse([]byte("dag_id: d\ntasks:\n  - id: a\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	healthy, err := st.TriggerRun(ctx, "d")
	require.NoError(t, err)
	_, err = s.Tick(ctx, 1)
	require.NoError(t, err)
	repaired := func() float64 {
		return testutil.ToFloat64(s.cfg.Metrics.Decisions.WithLabelValues(metrics.DecisionReconcileRepaired))
	}
	res, err := s.Reconcile(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Runs)
	assert.Zero(t, res.Moved())
	assert.Zero(t, repaired(), "nothing was missed")

	lost, err := st.TriggerRun(ctx, "d")
	require.NoError(t, err)
	_, err = raw.Exec(ctx, `DELETE FROM run_dirty WHERE run_id = $1`, lost.ID)
	require.NoError(t, err)
	_, err = s.Tick(ctx, 1)
	require.NoError(t, err)
	res, err = s.Reconcile(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Started)
	assert.Equal(t, 1, res.Queued)
	assert.Equal(t, 3.0, repaired(), "the start, the scheduling and the queueing the tick never saw")
	var state string
	require.NoError(t, raw.QueryRow(ctx, `SELECT state FROM task_instances WHERE run_id = $1`, lost.ID).Scan(&state))
	assert.Equal(t, "queued", state)
	require.NoError(t, raw.QueryRow(ctx, `SELECT state FROM runs WHERE id = $1`, healthy.ID).Scan(&state))
	assert.Equal(t, "running", state)
}

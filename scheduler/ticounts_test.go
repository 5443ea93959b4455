package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/store"
)

// One ti_counts pass sets vigil_task_instances from the live TIs: three
// queued, then two queued and one running once an agent has claimed one.
func TestTICountsSetsTheGaugeFromLiveTIs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, st := newScheduler(t, Config{})
	require.NoError(t, st.AcquireFence(ctx, 1, "t"))
	spec, err := dag.Parse([]byte("dag_id: c\ntasks:\n  - id: a\n    command: [\"true\"]\n" +
		"  - id: b\n    command: [\"true\"]\n  - id: c\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	_, err = st.TriggerRun(ctx, "c")
	require.NoError(t, err)
	_, err = s.Tick(ctx, 1)
	require.NoError(t, err)
	gauge := func(label string) float64 {
		return testutil.ToFloat64(s.cfg.Metrics.TaskInstances.WithLabelValues(label))
	}

	require.NoError(t, s.tiCounts.runOnce(ctx))
	assert.Equal(t, 3.0, gauge("queued"))
	assert.Equal(t, 0.0, gauge("running"))

	agent, err := st.Register(ctx, store.Registration{Name: "w", Capacity: 1})
	require.NoError(t, err)
	tasks, err := st.Claim(ctx, agent.AgentID, 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, 3.0, gauge("queued"), "the gauge moves only with a pass")
	require.NoError(t, s.tiCounts.runOnce(ctx))
	assert.Equal(t, 2.0, gauge("queued"))
	assert.Equal(t, 1.0, gauge("running"))
}

// Zero fields take the package defaults: the sweep interval and
// TICountsMaxDuty; a duty outside (0, 1) is a programmer error.
func TestTICountsDefaults(t *testing.T) {
	t.Parallel()
	c := newTICounts(tiCountsConfig{}, nil, nil)
	assert.Equal(t, tiCountsConfig{Interval: DefaultSweepInterval, MaxDuty: TICountsMaxDuty}, c.cfg)
	assert.Equal(t, 5*time.Second, newTICounts(tiCountsConfig{Interval: 5 * time.Second}, nil, nil).cfg.Interval)
	assert.Panics(t, func() { newTICounts(tiCountsConfig{MaxDuty: 1}, nil, nil) })
}

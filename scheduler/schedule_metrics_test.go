package scheduler

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// Each scheduled run created counts once in
// vigil_schedule_runs_created_total{run_type="scheduled"} and observes its
// lag: the pass's clock minus the slot's due time (its interval's end).
// The held slot gets its slot_held event.
func TestSchedulesMetricsCountRunsAndLag(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t, utc("2026-01-01T00:00:35Z"))
	e.apply(t, "dag_id: m\nschedule: \"@every 10s\"\nstart_date: 2026-01-01T00:00:00Z\ncatchup: true\nmax_active_runs: 5\n")
	m := e.s.cfg.Metrics

	require.Equal(t, 3, e.pass(t), "slots 00, 10 and 20 are due (their intervals end by 35s)")
	assert.Equal(t, 3.0, testutil.ToFloat64(m.ScheduleRunsCreated.WithLabelValues(store.RunScheduled)))
	assert.Equal(t, 0.0, testutil.ToFloat64(m.ScheduleRunsCreated.WithLabelValues(store.RunBackfill)))
	count, sum := histogram(t, m)
	assert.Equal(t, uint64(3), count)
	assert.InDelta(t, 25.0+15.0+5.0, sum, 1e-9, "lags 25s, 15s and 5s")

	require.Equal(t, 0, e.pass(t))
	count, _ = histogram(t, m)
	assert.Equal(t, uint64(3), count, "a pass that creates nothing observes nothing")

	// No catchup, at the cap: one run, held, with its events.
	e.apply(t, "dag_id: h\nschedule: \"@every 10s\"\nstart_date: 2026-01-01T00:00:00Z\nmax_active_runs: 1\n")
	_, err := e.db.Exec(e.ctx, `INSERT INTO runs (dag_id, timeout, max_active_tasks, deadline_at)
		SELECT 'h', NULL, 16, now() + interval '1 hour'`)
	require.NoError(t, err)
	require.Equal(t, 1, e.pass(t))
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM events e JOIN runs r ON r.id = e.run_id
		WHERE r.dag_id = 'h' AND e.kind = 'slot_held'`))
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM events e JOIN runs r ON r.id = e.run_id
		WHERE r.dag_id = 'h' AND e.kind = 'slots_skipped' AND e.message LIKE '%2 earlier%'`))
	assert.Equal(t, 4.0, testutil.ToFloat64(m.ScheduleRunsCreated.WithLabelValues(store.RunScheduled)))
}

func histogram(t *testing.T, m *metrics.Metrics) (uint64, float64) {
	t.Helper()
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "vigil_schedule_lag_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatal("vigil_schedule_lag_seconds is not registered")
	return 0, 0
}

// The metric's run_type labels are the store's run types.
func TestScheduleRunTypesMirrorStore(t *testing.T) {
	assert.Equal(t, []string{store.RunScheduled, store.RunBackfill}, metrics.ScheduleRunTypes())
}

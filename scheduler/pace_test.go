package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// A tick's pass that runs out of time is retried smaller, down to the
// run that alone cannot finish; that run is then set aside and retried on
// its own after the others, which progress. The failure is a real
// statement timeout, injected into the passes that hold run A.
func TestTickBacksOffPassesThatTimeOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var passes [][]int64
	failA := true
	var a int64
	s, st := newSchedulerWith(t, Config{TickBatch: 4}, store.TestSignals{
		PassTaken: func(ctx context.Context, tx store.Tx, ids []int64) error {
			passes = append(passes, ids)
			if !failA || !slices.Contains(ids, a) {
				return nil
			}
			if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 1`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `SELECT pg_sleep(5)`)
			return err
		}})
	require.NoError(t, st.AcquireFence(ctx, 1, "t"))
	var b strings.Builder
	b.WriteString("dag_id: w\ntasks:\n")
	for i := range 5 {
		fmt.Fprintf(&b, "  - id: t%d\n    command: [\"true\"]\n", i)
	}
	spec, err := dag.Parse([]byte(b.String()))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	var runs []int64
	for range 3 {
		r, err := st.TriggerRun(ctx, "w")
		require.NoError(t, err)
		runs = append(runs, r.ID)
	}
	a = runs[0]
	b2, c := runs[1], runs[2]

	timeouts := func() float64 {
		return testutil.ToFloat64(s.cfg.Metrics.Decisions.WithLabelValues(metrics.DecisionTickPassTimeout))
	}
	runState := func(id int64) string {
		d, err := st.GetRun(ctx, id)
		require.NoError(t, err)
		return string(d.State)
	}

	_, err = s.Tick(ctx, 1)
	require.True(t, store.IsPassTimeout(err), "tick 1: %v", err)
	assert.Equal(t, [][]int64{{a, b2, c}}, passes)
	assert.Equal(t, 1.0, timeouts())

	_, err = s.Tick(ctx, 1)
	require.True(t, store.IsPassTimeout(err), "tick 2: %v", err)
	assert.Equal(t, []int64{a}, passes[1], "the next pass takes half the runs (3/2 = 1)")
	assert.Equal(t, 2.0, timeouts())

	res, err := s.Tick(ctx, 1)
	require.True(t, store.IsPassTimeout(err), "tick 3: the stuck run's own retry fails again: %v", err)
	assert.Equal(t, [][]int64{{b2}, {c}, {a}}, passes[2:], "the others first, one then two runs a pass; A alone last")
	assert.Equal(t, 2, res.Started)
	assert.Equal(t, "running", runState(b2))
	assert.Equal(t, "running", runState(c))
	assert.Equal(t, "queued", runState(a))
	assert.Equal(t, 3.0, timeouts(), "every timed-out pass is counted")

	failA = false
	res, err = s.Tick(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, [][]int64{{a}}, passes[5:], "A is retried on its own and commits")
	assert.Equal(t, 1, res.Started)
	assert.Equal(t, "running", runState(a))
	assert.Empty(t, s.pace.stuck, "a run whose pass committed is no longer stuck")
	assert.Equal(t, 4, s.pace.limit(&s.cfg).Runs, "the cap doubled back to TickBatch")
}

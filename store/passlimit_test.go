package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
)

// wideDAG is a DAG of n independent tasks.
func wideDAG(id string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dag_id: %s\ntasks:\n", id)
	for i := range n {
		fmt.Fprintf(&b, "  - id: t%d\n    command: [\"true\"]\n", i)
	}
	return b.String()
}

// passRecorder is a PassTaken signal that records each pass's runs and
// their non-terminal TIs (as the pass saw them), and fails a pass when
// fail says so, with a real statement timeout.
type passRecorder struct {
	runs   [][]int64
	widths []int
	fail   func(ids []int64) bool
}

func (p *passRecorder) signals() store.TestSignals {
	return store.TestSignals{PassTaken: func(ctx context.Context, tx store.Tx, ids []int64) error {
		p.runs = append(p.runs, ids)
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM task_instances WHERE run_id = ANY ($1)
			AND state NOT IN ('success','failed','upstream_failed','skipped','cancelled')`, ids).Scan(&n); err != nil {
			return err
		}
		p.widths = append(p.widths, n)
		if p.fail != nil && p.fail(ids) {
			return timeOut(ctx, tx)
		}
		return nil
	}}
}

// timeOut makes tx fail as a pass past its bound does: PostgreSQL cancels
// a statement that outlives statement_timeout (SQLSTATE 57014).
func timeOut(ctx context.Context, tx store.Tx) error {
	if _, err := tx.Exec(ctx, `SET LOCAL statement_timeout = 1`); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `SELECT pg_sleep(5)`)
	return err
}

// passes runs SchedulePass within lim until the queue is drained.
func (e *schedEnv) passes(lim store.PassLimit) {
	for {
		res, err := e.st.SchedulePass(e.ctx, 1, lim)
		require.NoError(e.t, err)
		if !res.More {
			return
		}
	}
}

// A pass takes dirty runs, oldest first, while their non-terminal TIs fit
// the budget, and always at least one: wide runs are scheduled over
// several passes, none past the budget, each run progressing.
func TestSchedulePassBoundedByTIs(t *testing.T) {
	t.Parallel()
	rec := &passRecorder{}
	e := newSchedEnvWith(t, rec.signals())
	e.apply(wideDAG("w50", 50))
	r1, r2, r3 := e.trigger("w50"), e.trigger("w50"), e.trigger("w50")

	e.passes(store.PassLimit{Runs: 256, TIs: 60})
	assert.Equal(t, [][]int64{{r1}, {r2}, {r3}}, rec.runs, "50 + 50 TIs exceed 60: one run a pass")
	assert.Equal(t, []int{50, 50, 50}, rec.widths)
	for _, r := range []int64{r1, r2, r3} {
		assert.Equal(t, "running", e.runState(r))
		assert.Positive(t, e.tiCount(r, "queued"), "run %d progressed", r)
	}
	res, err := e.st.SchedulePass(e.ctx, 1, store.PassLimit{Runs: 256, TIs: 60})
	require.NoError(t, err)
	assert.Zero(t, res.Runs, "the queue is drained")

	rec.runs, rec.widths = nil, nil
	r4, r5, r6 := e.trigger("w50"), e.trigger("w50"), e.trigger("w50")
	e.passes(store.PassLimit{Runs: 256, TIs: 100})
	assert.Equal(t, [][]int64{{r4, r5}, {r6}}, rec.runs, "runs are packed up to the budget")
	assert.Equal(t, []int{100, 50}, rec.widths)

	rec.runs, rec.widths = nil, nil
	r7 := e.trigger("w50")
	e.passes(store.PassLimit{Runs: 256, TIs: 30})
	assert.Equal(t, [][]int64{{r7}}, rec.runs, "a run wider than the budget is still taken, alone")
	assert.Equal(t, "running", e.runState(r7))
}

// The reconcile's keyset batches are bounded by TIs the same way.
func TestReconcileRunsBoundedByTIs(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(wideDAG("w50", 50))
	r1, r2, r3 := e.trigger("w50"), e.trigger("w50"), e.trigger("w50")
	_, err := e.raw.Exec(e.ctx, `DELETE FROM run_dirty`)
	require.NoError(t, err)

	var after int64
	var lasts []int64
	for range 3 {
		res, last, err := e.st.ReconcileRuns(e.ctx, 1, after, store.PassLimit{Runs: 500, TIs: 60})
		require.NoError(t, err)
		assert.Equal(t, 1, res.Runs)
		lasts = append(lasts, last)
		after = last
	}
	assert.Equal(t, []int64{r1, r2, 0}, lasts, "one run a batch, then the keyset is exhausted")
	for _, r := range []int64{r1, r2, r3} {
		assert.Equal(t, "running", e.runState(r))
	}
}

// A pass that fails past its bound names the runs it took, which stay
// queued; Skip and Only let the caller retry around a run or on it alone.
func TestSchedulePassTimeoutKeepsItsRuns(t *testing.T) {
	t.Parallel()
	rec := &passRecorder{}
	e := newSchedEnvWith(t, rec.signals())
	e.apply(wideDAG("w5", 5))
	r1, r2, r3 := e.trigger("w5"), e.trigger("w5"), e.trigger("w5")
	rec.fail = func(ids []int64) bool { return ids[0] == r1 }

	_, err := e.st.SchedulePass(e.ctx, 1, store.PassLimit{Runs: 256})
	require.Error(t, err)
	assert.True(t, store.IsPassTimeout(err), "a statement timeout is a pass timeout: %v", err)
	var pe *store.PassError
	require.True(t, errors.As(err, &pe))
	assert.Equal(t, []int64{r1, r2, r3}, pe.RunIDs)
	assert.Equal(t, 3, e.count(`SELECT count(DISTINCT run_id) FROM run_dirty`), "the dirty rows were rolled back")
	assert.Equal(t, "queued", e.runState(r1))
	assert.False(t, store.IsPassTimeout(errors.New("other")))

	e.passes(store.PassLimit{Runs: 1, Skip: []int64{r1}})
	assert.Equal(t, "running", e.runState(r2))
	assert.Equal(t, "running", e.runState(r3))
	assert.Equal(t, "queued", e.runState(r1), "skipped")

	rec.fail = nil
	res, err := e.st.SchedulePass(e.ctx, 1, store.PassLimit{Runs: 256, Only: []int64{r1}})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Runs)
	assert.Equal(t, "running", e.runState(r1))
	assert.Equal(t, [][]int64{{r1, r2, r3}, {r2}, {r3}, {r1}}, rec.runs)
}

package reaper

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now(context.Context) (time.Time, error) { return c.t, nil }

func newIsolated(t *testing.T) (*Reapers, *store.Store, *metrics.Metrics) {
	t.Helper()
	st, err := store.Open(context.Background(), storetest.DB(t))
	require.NoError(t, err)
	m := metrics.New()
	r, err := New(Config{Store: st, Metrics: m, Clock: fixedClock{time.Now()}, Logger: slog.New(slog.DiscardHandler),
		Thresholds: DefaultThresholds})
	require.NoError(t, err)
	return r, st, m
}

// One candidate that panics or fails is counted as <reaper>_error and
// does not stop the sweep; a decision is counted only when its write
// landed.
func TestCandidateFailuresAreIsolated(t *testing.T) {
	t.Parallel()
	r, st, m := newIsolated(t)
	defer st.Close()
	ctx := context.Background()
	cand := Candidate{Reaper: state.ReaperOrphan, Decision: metrics.DecisionOrphanReaped, RunID: 7}

	applied, err := r.act(ctx, state.ReaperOrphan, 1, plan{Candidate: cand, apply: func(context.Context, int64) (bool, error) {
		panic("boom")
	}})
	require.ErrorContains(t, err, "panicked: boom")
	assert.False(t, applied)

	_, err = r.act(ctx, state.ReaperOrphan, 1, plan{Candidate: cand, apply: func(context.Context, int64) (bool, error) {
		return false, errors.New("disk on fire")
	}})
	require.ErrorContains(t, err, "disk on fire")
	assert.Equal(t, 2.0, testutil.ToFloat64(m.Decisions.WithLabelValues("orphan_error")))

	lost, err := r.act(ctx, state.ReaperOrphan, 1, plan{Candidate: cand, apply: func(context.Context, int64) (bool, error) {
		return false, nil // the signal changed: the live side won
	}})
	require.NoError(t, err)
	assert.False(t, lost)
	assert.Zero(t, testutil.ToFloat64(m.Decisions.WithLabelValues("orphan_reaped")))

	ok, err := r.act(ctx, state.ReaperOrphan, 1, plan{Candidate: cand, apply: func(context.Context, int64) (bool, error) {
		return true, nil
	}})
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Decisions.WithLabelValues("orphan_reaped")))

	// A fenced write is not a candidate error: it ends the sweep.
	_, err = r.act(ctx, state.ReaperOrphan, 1, plan{Candidate: cand, apply: func(context.Context, int64) (bool, error) {
		return false, &store.FencedError{Ours: 1, Current: 2}
	}})
	require.True(t, store.IsFenced(err))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.Decisions.WithLabelValues("orphan_error")))
}

// A failing list query counts <reaper>_list_error, and the other reapers
// still run; the next sweep retries.
func TestListErrorsAreCountedPerReaper(t *testing.T) {
	t.Parallel()
	r, st, m := newIsolated(t)
	st.Close() // every query now fails
	rep, err := r.Sweep(context.Background(), Term{Epoch: 1, GraceStart: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	assert.Len(t, rep.Errors, 6, "every reaper ran and failed on its own")
	for _, name := range []string{"agent_lost_list_error", "dispatch_lost_list_error", "orphan_list_error",
		"agent_inactive_list_error", "execution_timeout_list_error", "run_timeout_list_error"} {
		assert.Equal(t, 1.0, testutil.ToFloat64(m.Decisions.WithLabelValues(name)), name)
	}
	sweeps := r.LastSweeps()
	require.Len(t, sweeps, 6)
	for _, sw := range sweeps {
		assert.Equal(t, 1, sw.Errors, "%s's last sweep records its one error", sw.Reaper)
	}
}

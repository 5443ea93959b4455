package leader

// Regression tests for the fence domain: a fence that refuses every
// candidate (an etcd restored from a backup, a Lite fence under Pro) says
// so in Status and vigil_leader_fence_blocked, and an audited reset lets
// the replicas lead again. Before the fix the only signal was a log line.

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/internal/testlog"
	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/maintenance"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// TestEtcdBlockedByFenceUntilReset: the fence holds an etcd revision far
// above what this (fresh, "restored") etcd hands out. The replica wins the
// election but must not lead; it reports the block. After `vigil fence
// reset` (store.ResetFence) it leads in generation 1.
func TestEtcdBlockedByFenceUntilReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	_, err := st.AcquireFenceIn(ctx, store.FenceDomainEtcd, 1_000_000, "before-restore")
	require.NoError(t, err)
	eps := etcdtest.Start(t)
	r := startReplica(t, eps, st, "r1", fencedWork(st))

	require.Eventually(t, func() bool { return r.e.Status().FenceBlocked }, 10*time.Second, 10*time.Millisecond)
	s := r.e.Status()
	assert.False(t, s.Leading)
	assert.Contains(t, s.FenceBlockedReason, store.FenceRefusedRevision)
	assert.Contains(t, s.FenceBlockedReason, "revision 1000000")
	assert.Contains(t, s.FenceBlockedReason, "vigil fence reset")
	assert.Equal(t, 1.0, testutil.ToFloat64(r.m.LeaderFenceBlocked))
	assert.Equal(t, 0.0, testutil.ToFloat64(r.m.Leader))
	f, err := st.FenceState(ctx)
	require.NoError(t, err)
	assert.Equal(t, "before-restore", f.Holder, "the refused candidate wrote nothing")

	_, _, err = st.ResetFence(ctx, "test", "etcd restored from a backup")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return r.e.Status().Leading }, 15*time.Second, 10*time.Millisecond)
	s = r.e.Status()
	assert.False(t, s.FenceBlocked)
	assert.Empty(t, s.FenceBlockedReason)
	assert.Equal(t, 0.0, testutil.ToFloat64(r.m.LeaderFenceBlocked))
	assert.Equal(t, 1.0, testutil.ToFloat64(r.m.Leader))
	f, err = st.FenceState(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), f.Generation)
	assert.Equal(t, store.FenceDomainEtcd, f.Domain)
	assert.Equal(t, "r1", f.Holder)
	assert.Equal(t, store.FenceToken(1, f.Revision), s.Epoch, "the term writes under generation 1's token")
	assert.Contains(t, r.logs.String(), "leadership blocked by the leader fence")
}

// TestStaticBlockedByEtcdFenceUntilReset: Lite against a database whose
// fence a Pro cluster holds is blocked (not "fenced out by a later Lite");
// a reset lets it lead.
func TestStaticBlockedByEtcdFenceUntilReset(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openStore(t)
	_, err := st.AcquireFenceIn(ctx, store.FenceDomainEtcd, 7, "pro-replica")
	require.NoError(t, err)
	m := metrics.New()
	logs := &testlog.Buffer{}
	s := NewStatic(st, "lite", slog.New(slog.NewTextHandler(logs, nil)), m)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, Callbacks{OnStartedLeading: fencedWork(st)}) }()

	require.Eventually(t, func() bool { return s.Status().FenceBlocked }, 10*time.Second, 10*time.Millisecond)
	assert.False(t, s.Status().Leading)
	assert.Contains(t, s.Status().FenceBlockedReason, store.FenceRefusedDomain)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.LeaderFenceBlocked))
	// It keeps drawing, each retry after a doubled backoff from 500 ms.
	retry := `msg="could not take the leader epoch; retrying"`
	require.Eventually(t, func() bool { return strings.Count(logs.String(), retry) >= 2 }, 10*time.Second, 10*time.Millisecond)
	var backoffs []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, retry) && len(backoffs) < 2 {
			backoffs = append(backoffs, line[strings.LastIndex(line, " backoff=")+1:])
		}
	}
	assert.Equal(t, []string{"backoff=500ms", "backoff=1s"}, backoffs)

	_, _, err = st.ResetFence(ctx, "test", "moved this database from Pro to Lite")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Status().Leading }, 15*time.Second, 10*time.Millisecond)
	assert.False(t, s.Status().FenceBlocked)
	assert.Equal(t, 0.0, testutil.ToFloat64(m.LeaderFenceBlocked))
	f, err := st.FenceState(ctx)
	require.NoError(t, err)
	assert.Equal(t, store.FenceDomainLite, f.Domain)
	cancel()
	assert.NoError(t, <-done)
}

// TestStaticLeadsAgainAfterReset: a reset while Lite leads fences its term
// out; Lite notices the reset (no holder) and leads in the new generation
// instead of idling as if another process had taken over.
func TestStaticLeadsAgainAfterReset(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := openStore(t)
	s := NewStatic(st, "lite", nil, nil)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, Callbacks{OnStartedLeading: fencedWork(st)}) }()
	require.Eventually(t, func() bool { return s.Status().Leading }, 10*time.Second, 10*time.Millisecond)
	first := s.Status().Epoch
	assert.Less(t, first, int64(store.FenceRevisionLimit), "generation 0")

	_, _, err := st.ResetFence(ctx, "test", "drill")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		x := s.Status()
		return x.Leading && x.Epoch > int64(store.FenceRevisionLimit)
	}, 10*time.Second, 10*time.Millisecond, "leads in generation 1")
	f, err := st.FenceState(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), f.Generation)
	assert.Equal(t, "lite", f.Holder)
	cancel()
	assert.NoError(t, <-done)
}

// The fence watch's pass keeps the block while the refusing fence row is
// unchanged, ends it (status, gauge, log) once the row changes, and
// finishes its service once there is no block left to watch.
func TestFenceWatchPassClearsTheBlockWhenTheFenceChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openStore(t)
	_, err := st.AcquireFenceIn(ctx, store.FenceDomainEtcd, 7, "pro-replica")
	require.NoError(t, err)
	refused, err := st.FenceState(ctx)
	require.NoError(t, err)
	m := metrics.New()
	logs := &testlog.Buffer{}
	b := &fenceBlock{store: st, status: &statusBox{}, m: m, log: slog.New(slog.NewTextHandler(logs, nil))}
	b.set(ctx, &store.FencedError{Refusal: store.FenceRefusedDomain, Domain: store.FenceDomainLite, Revision: 1, Fence: &refused}, false)
	require.True(t, b.status.get().FenceBlocked)

	require.NoError(t, b.watchOnce(ctx), "the fence has not changed: the block stays")
	assert.True(t, b.status.get().FenceBlocked)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.LeaderFenceBlocked))

	_, _, err = st.ResetFence(ctx, "test", "drill")
	require.NoError(t, err)
	require.ErrorIs(t, b.watchOnce(ctx), maintenance.ErrFinished, "a changed fence ends the watch")
	assert.False(t, b.status.get().FenceBlocked)
	assert.Empty(t, b.status.get().FenceBlockedReason)
	assert.Equal(t, 0.0, testutil.ToFloat64(m.LeaderFenceBlocked))
	assert.Contains(t, logs.String(), "leader fence no longer blocks this replica")
	assert.Contains(t, logs.String(), "generation 1")

	require.ErrorIs(t, b.watchOnce(ctx), maintenance.ErrFinished, "no block: nothing to watch")
}

package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func newScheduler(t *testing.T, cfg Config) (*Scheduler, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), storetest.DB(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	cfg.Store, cfg.Metrics = st, metrics.New()
	s, err := New(cfg)
	require.NoError(t, err)
	return s, st
}

func TestHeartbeatReportsStaleTickAndDatabase(t *testing.T) {
	t.Parallel()
	s, st := newScheduler(t, Config{Interval: 100 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, s.Heartbeat(ctx), "a follower with a reachable database is healthy")

	s.leading.Store(true)
	s.lastTick.Store(time.Now().UnixNano())
	require.NoError(t, s.Heartbeat(ctx))
	s.lastTick.Store(time.Now().Add(-2 * time.Second).UnixNano()) // > 3 × 100ms + 1s
	err := s.Heartbeat(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "last scheduler tick")

	st.Close()
	err = s.Heartbeat(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "database unreachable")
}

func TestThresholdValidationNamesTheField(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Store: &store.Store{}, Metrics: metrics.New(), HeartbeatInterval: 15 * time.Second,
		Thresholds: reaper.Thresholds{AgentLost: 20 * time.Second, DispatchLost: time.Minute, Orphan: 0}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "agent-lost-threshold: 20s must be at least 2 × the heartbeat interval")
	assert.Contains(t, err.Error(), "orphan-threshold: 0s is outside 1s..24h0m0s")

	_, err = New(Config{Store: &store.Store{}, Metrics: metrics.New(), SweepInterval: time.Hour})
	require.ErrorContains(t, err, "recovery.sweep-interval")
}

// The tuning API is safe under concurrency, validates the whole set,
// persists for every replica, and changes nothing on error.
func TestSetThresholdsConcurrentlyAndShared(t *testing.T) {
	t.Parallel()
	s, st := newScheduler(t, Config{HeartbeatInterval: 5 * time.Second})
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(3)
		go func() { defer wg.Done(); assert.NoError(t, s.SetAgentLostThreshold(ctx, 30*time.Second)) }()
		go func() { defer wg.Done(); assert.NoError(t, s.SetDispatchLostThreshold(ctx, 2*time.Minute)) }()
		go func() { defer wg.Done(); assert.NoError(t, s.SetOrphanThreshold(ctx, 4*time.Minute)) }()
	}
	wg.Wait()
	want := reaper.Thresholds{AgentLost: 30 * time.Second, DispatchLost: 2 * time.Minute, Orphan: 4 * time.Minute}
	assert.Equal(t, want, s.Thresholds())

	err := s.SetAgentLostThreshold(ctx, 9*time.Second)
	require.ErrorContains(t, err, "agent-lost-threshold")
	assert.Equal(t, want, s.Thresholds(), "a rejected change changes nothing")

	// Another replica, same database: it sees the overrides.
	other, err := New(Config{Store: st, Metrics: metrics.New(), HeartbeatInterval: 5 * time.Second})
	require.NoError(t, err)
	require.NoError(t, other.RefreshThresholds(ctx))
	assert.Equal(t, want, other.Thresholds())

	require.NoError(t, other.ResetThresholds(ctx))
	assert.Equal(t, reaper.DefaultThresholds(), other.Thresholds())
	require.NoError(t, s.RefreshThresholds(ctx))
	assert.Equal(t, reaper.DefaultThresholds(), s.Thresholds())
}

package scheduler

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/reaper/reapertest"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func newScheduler(t *testing.T, cfg Config) (*Scheduler, *store.Store) {
	t.Helper()
	return newSchedulerWith(t, cfg, store.TestSignals{})
}

// newSchedulerWith is newScheduler with a store that carries signals.
func newSchedulerWith(t *testing.T, cfg Config, signals store.TestSignals) (*Scheduler, *store.Store) {
	t.Helper()
	st, err := store.OpenWithOptions(context.Background(), storetest.DB(t), store.Options{TestSignals: signals})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	cfg.Store, cfg.Metrics = st, metrics.New()
	s, err := New(cfg)
	require.NoError(t, err)
	return s, st
}

// leadingEnv is a scheduler leading epoch 1 on a stepped clock, with one
// started TI of run 'd' on agent w.
type leadingEnv struct {
	ctx    context.Context
	s      *Scheduler
	st     *store.Store
	clock  *reapertest.Clock
	run    int64
	agent  int64
	task   store.ClaimedTask
	done   chan error
	cancel context.CancelFunc
}

func startLeading(t *testing.T, th reaper.Thresholds, hook func(context.Context)) *leadingEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, storetest.DB(t))
	require.NoError(t, err)
	dbNow, err := st.Now(ctx)
	require.NoError(t, err)
	e := &leadingEnv{ctx: ctx, st: st, clock: reapertest.NewClock(dbNow), done: make(chan error, 1), cancel: cancel}
	e.s, err = New(Config{Store: st, Metrics: metrics.New(), Interval: 20 * time.Millisecond, SweepInterval: 100 * time.Millisecond,
		HeartbeatInterval: time.Second, Thresholds: th, Clock: e.clock, TestSignals: TestSignals{TickStarted: hook}})
	require.NoError(t, err)
	spec, err := dag.Parse([]byte("dag_id: d\ntasks:\n  - id: a\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	run, err := st.TriggerRun(ctx, "d")
	require.NoError(t, err)
	e.run = run.ID
	require.NoError(t, st.AcquireFence(ctx, 1, "t"))
	go func() { e.done <- e.s.Lead(ctx, leader.Term{Epoch: 1, Holder: "t"}) }()
	e.agent = storetest.Agent(t, st, store.Registration{Name: "w", Capacity: 1})
	var tasks []store.ClaimedTask
	require.Eventually(t, func() bool {
		tasks, err = st.Claim(ctx, e.agent, 1)
		return err == nil && len(tasks) == 1
	}, 5*time.Second, 10*time.Millisecond)
	e.task = tasks[0]
	_, _, err = st.Heartbeat(ctx, e.agent, []store.HeartbeatEntry{{Attempt: e.task.Attempt, Started: true}})
	require.NoError(t, err)
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-e.done)
		st.Close()
	})
	return e
}

func (e *leadingEnv) tiState(t *testing.T) state.TI {
	d, err := e.st.GetRun(e.ctx, e.run)
	require.NoError(t, err)
	return d.TaskInstances[0].State
}

// Health follows the stall detector (no database clock reading for longer
// than the gap limit) and the database, not how long work takes.
func TestHeartbeatReportsStallAndDatabase(t *testing.T) {
	t.Parallel()
	s, st := newScheduler(t, Config{Interval: 100 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, s.Heartbeat(ctx), "a follower with a reachable database is healthy")

	e := startLeading(t, reaper.Thresholds{AgentLost: 2 * time.Second, DispatchLost: time.Hour, Orphan: time.Hour}, nil)
	require.NoError(t, e.s.Heartbeat(ctx))
	grace := e.s.currentTerm().GraceStart
	e.clock.Add(100 * time.Millisecond)
	e.clock.Fail(errors.New("database unreachable (test)"))
	require.Eventually(t, func() bool {
		err := e.s.Heartbeat(ctx)
		return err != nil && strings.Contains(err.Error(), "leader stalled")
	}, 5*time.Second, 20*time.Millisecond, "no clock reading for longer than the gap limit is a stall")
	e.clock.Fail(nil)
	require.Eventually(t, func() bool { return e.s.Heartbeat(ctx) == nil }, 5*time.Second, 20*time.Millisecond)
	assert.True(t, e.s.currentTerm().GraceStart.After(grace), "a failed reading restarts the grace")

	st.Close()
	err := s.Heartbeat(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "database unreachable")
}

// A service whose pass takes longer than the gap limit (here the tick,
// held by a hook) is neither a stall nor a reason to hold back the other
// services: the grace is not restarted, the agent-lost reaper keeps
// reaping, and health stays good.
func TestSlowServiceDoesNotStallTheOthers(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var armed, held atomic.Bool
	hook := func(ctx context.Context) {
		if armed.Load() && held.CompareAndSwap(false, true) {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	}
	e := startLeading(t, reaper.Thresholds{AgentLost: 2 * time.Second, DispatchLost: time.Hour, Orphan: time.Hour}, hook)
	defer close(release)
	armed.Store(true)
	grace := e.s.currentTerm().GraceStart
	require.Eventually(t, held.Load, 5*time.Second, 5*time.Millisecond, "the tick is held")

	// Wall time passes beyond the gap limit (1.06 s here) while the tick is
	// stuck; the database clock advances with it, in small steps.
	for i := 0; i < 30; i++ {
		e.clock.Add(100 * time.Millisecond)
		time.Sleep(60 * time.Millisecond)
		require.NoError(t, e.s.Heartbeat(e.ctx), "a slow tick is not a health problem")
	}
	assert.Equal(t, grace, e.s.currentTerm().GraceStart, "a slow service never restarts the grace")
	require.Eventually(t, func() bool { return e.tiState(t) == state.TIFailed }, 5*time.Second, 20*time.Millisecond,
		"the agent-lost reaper runs while the tick is held")
	assert.True(t, held.Load())
}

func TestThresholdValidationNamesTheField(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Store: &store.Store{}, Metrics: metrics.New(), HeartbeatInterval: 15 * time.Second,
		Thresholds: reaper.Thresholds{AgentLost: 20 * time.Second, DispatchLost: time.Minute, Orphan: 0}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "AgentLost: 20s must be at least 2 × the heartbeat interval")
	assert.Contains(t, err.Error(), "Orphan: 0s is outside 1s..24h0m0s")

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
	require.ErrorContains(t, err, "AgentLost")
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

// waitAgentLostSweep waits until an agent-lost pass that read clock's
// current time, or a later one, has completed: the first sweep that could
// act on the clock's latest step has had its chance.
func waitAgentLostSweep(t *testing.T, s *Scheduler, clock *reapertest.Clock) {
	t.Helper()
	now, err := clock.Now(context.Background())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, sw := range s.reapers.LastSweeps() {
			if sw.Reaper == state.ReaperAgentLost && !sw.At.Before(now) {
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "an agent-lost sweep at %s", now)
}

// A stall with no error (a paused database, a stopped process) blinds the
// leader exactly like an outage: the grace must restart before the next
// sweep, so healthy tasks whose agents could not report are not reaped.
func TestStallRestartsGraceBeforeReaping(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, storetest.DB(t))
	require.NoError(t, err)
	defer st.Close()
	dbNow, err := st.Now(ctx)
	require.NoError(t, err)
	clock := reapertest.NewClock(dbNow)
	th := reaper.Thresholds{AgentLost: 2 * time.Second, DispatchLost: time.Hour, Orphan: time.Hour}
	s, err := New(Config{Store: st, Metrics: metrics.New(), Interval: 20 * time.Millisecond, SweepInterval: 100 * time.Millisecond,
		HeartbeatInterval: time.Second, Thresholds: th, Clock: clock})
	require.NoError(t, err)

	spec, err := dag.Parse([]byte("dag_id: d\ntasks:\n  - id: a\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	run, err := st.TriggerRun(ctx, "d")
	require.NoError(t, err)
	require.NoError(t, st.AcquireFence(ctx, 1, "t"))
	done := make(chan error, 1)
	go func() { done <- s.Lead(ctx, leader.Term{Epoch: 1, Holder: "t"}) }()

	agent := storetest.Agent(t, st, store.Registration{Name: "w", Capacity: 1})
	var tasks []store.ClaimedTask
	require.Eventually(t, func() bool {
		tasks, err = st.Claim(ctx, agent, 1)
		return err == nil && len(tasks) == 1
	}, 5*time.Second, 10*time.Millisecond)
	_, _, err = st.Heartbeat(ctx, agent, []store.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}})
	require.NoError(t, err)
	tiState := func() state.TI {
		d, err := st.GetRun(ctx, run.ID)
		require.NoError(t, err)
		return d.TaskInstances[0].State
	}

	// A 10-minute stall: the TI's heartbeat looks 10 minutes old, and the
	// term is far older than the threshold. Without the gap check the next
	// sweep would reap it.
	clock.Add(10 * time.Minute)
	waitAgentLostSweep(t, s, clock)
	assert.Equal(t, state.TIRunning, tiState(), "staleness accrued during the stall must not count")

	// Silent for longer than the threshold after the new grace: reaped.
	// (The steps are paced in wall time so that ticks see the clock move
	// in steps below the gap limit, as a healthy leader's would.)
	for i := 0; i < 6 && tiState() == state.TIRunning; i++ {
		clock.Add(500 * time.Millisecond)
		time.Sleep(150 * time.Millisecond)
	}
	// The clock stops at 3 s past the stall; the sweep that reaps may
	// still be under way on a loaded machine (CI saw its decision logged
	// just after the last step), so wait for it without moving the clock.
	require.Eventually(t, func() bool { return tiState() == state.TIFailed }, 30*time.Second, 20*time.Millisecond,
		"reaped within 3 s of the database clock after the stall")
	cancel()
	require.NoError(t, <-done)
}

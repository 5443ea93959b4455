package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

// On the leader: three of four agents fall silent; the
// agent-lost service holds (counted, and MassSilence reports it for
// health), and the operator's forced sweep (SweepNow, vigil reap) reaps
// past the brake.
func TestMassSilenceBrakeHoldsTheServicesButNotAForcedSweep(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	url := storetest.DB(t)
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	raw, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	dbNow, err := st.Now(ctx)
	require.NoError(t, err)
	clock := reapertest.NewClock(dbNow)
	m := metrics.New()
	s, err := New(Config{Store: st, Metrics: m, Interval: 20 * time.Millisecond, SweepInterval: 100 * time.Millisecond,
		HeartbeatInterval: time.Second, Clock: clock,
		Thresholds: reaper.Thresholds{AgentLost: 2 * time.Second, DispatchLost: time.Hour, Orphan: time.Hour}})
	require.NoError(t, err)
	assert.False(t, s.MassSilence().Engaged, "a follower reports no brake")

	spec, err := dag.Parse([]byte("dag_id: d\ntasks:\n  - id: a\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	run, err := st.TriggerRun(ctx, "d")
	require.NoError(t, err)
	require.NoError(t, st.AcquireFence(ctx, 1, "t"))
	done := make(chan error, 1)
	go func() { done <- s.Lead(ctx, leader.Term{Epoch: 1, Holder: "t"}) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		raw.Close()
		st.Close()
	})
	var agents []int64
	for i := 0; i < 4; i++ {
		id := storetest.Agent(t, st, store.Registration{Name: fmt.Sprintf("w%d", i), Capacity: 1})
		agents = append(agents, id)
	}
	var task store.ClaimedTask
	require.Eventually(t, func() bool {
		tasks, err := st.Claim(ctx, agents[0], 1)
		if err == nil && len(tasks) == 1 {
			task = tasks[0]
			return true
		}
		return false
	}, 5*time.Second, 10*time.Millisecond)
	_, _, err = st.Heartbeat(ctx, agents[0], []store.HeartbeatEntry{{Attempt: task.Attempt, Started: true}})
	require.NoError(t, err)
	// w3 stays alive (its heartbeat is ahead of the stepped clock); w0..w2
	// fall silent as the clock moves on, in steps shorter than the gap
	// limit so the grace is not restarted.
	_, err = raw.Exec(ctx, `UPDATE agents SET last_heartbeat_at = now() + interval '1 hour' WHERE id = $1`, agents[3])
	require.NoError(t, err)
	tiState := func() state.TI {
		d, err := st.GetRun(ctx, run.ID)
		require.NoError(t, err)
		return d.TaskInstances[0].State
	}
	held := func() float64 { return testutil.ToFloat64(m.Decisions.WithLabelValues(metrics.DecisionAgentLostHeld)) }
	for i := 0; i < 60 && held() < 2; i++ {
		clock.Add(100 * time.Millisecond)
		time.Sleep(40 * time.Millisecond)
	}
	require.GreaterOrEqual(t, held(), 2.0, "the agent-lost service is held pass after pass")
	b := s.MassSilence()
	assert.True(t, b.Engaged)
	assert.Equal(t, 3, b.Silent)
	assert.Equal(t, 4, b.Active)
	assert.Contains(t, b.Message, "3 of 4 active agents went silent")
	assert.Equal(t, state.TIRunning, tiState(), "the silent agent's task is not reaped")
	assert.Zero(t, testutil.ToFloat64(m.Decisions.WithLabelValues(metrics.DecisionAgentLost)))

	rep, err := s.SweepNow(ctx)
	require.NoError(t, err)
	assert.Contains(t, rep.GraceText(), "bypassed by this forced sweep")
	assert.Equal(t, state.TIFailed, tiState(), "vigil reap reaps past the brake")
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Decisions.WithLabelValues(metrics.DecisionAgentLost)))
}

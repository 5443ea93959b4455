package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
)

func TestPlanIsDeterministicAndKeepsLanesApart(t *testing.T) {
	p1 := Plan(42, 1000, 4, time.Second, DefaultTiming)
	p2 := Plan(42, 1000, 4, time.Second, DefaultTiming)
	require.Equal(t, p1, p2, "the same seed gives the same plan")
	assert.NotEqual(t, p1, Plan(43, 1000, 4, time.Second, DefaultTiming))
	require.Len(t, p1, 1000)
	kinds := map[FaultKind]int{}
	lanes := map[int][]Fault{}
	for _, f := range p1 {
		kinds[f.Kind]++
		lanes[f.lane()] = append(lanes[f.lane()], f)
	}
	for _, k := range AllKinds {
		assert.Positive(t, kinds[k], "1000 faults cover %s", k)
	}
	for lane, fs := range lanes {
		for i := 1; i < len(fs); i++ {
			assert.GreaterOrEqual(t, fs[i].At, fs[i-1].At+fs[i-1].Hold, "lane %d: fault %d overlaps %d", lane, fs[i].Seq, fs[i-1].Seq)
		}
	}
	for _, f := range p1 {
		switch f.Kind {
		case AgentStopShort, AgentPartitionShort:
			assert.Less(t, f.Hold, DefaultTiming.AgentLost, "short is below the threshold")
		case AgentStopLong, AgentPartitionLong:
			assert.Greater(t, f.Hold, DefaultTiming.AgentLost, "long is past the threshold")
		case LeaderStop, LeaderStopMidTx, LeaderEtcdCut:
			assert.Greater(t, f.Hold, DefaultTiming.ElectionTTL, "past the election TTL")
		}
		switch f.Kind {
		case EtcdRestart, EtcdMemberKill, EtcdMemberPartition:
			assert.Equal(t, laneEtcd, f.lane(), "one etcd fault at a time: %+v", f)
		case LeaderEtcdCut:
			assert.Equal(t, laneControl, f.lane(), "a leader fault: %+v", f)
			assert.Contains(t, []string{"cut", "blackhole"}, f.Mode)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cfg, err := ConfigFromEnv(env(map[string]string{"CHAOS_SEED": "7", "CHAOS_FAULTS": "20", "CHAOS_DURATION": "40s"}))
	require.NoError(t, err)
	assert.Equal(t, int64(7), cfg.Seed)
	assert.Equal(t, 20, cfg.Faults)
	assert.Equal(t, 2*time.Second, cfg.gap())
	cfg, err = ConfigFromEnv(env(nil))
	require.NoError(t, err)
	assert.Equal(t, DefaultFaults, cfg.Faults)
	assert.Positive(t, cfg.Seed, "a random seed when none is given")
	assert.False(t, cfg.Patroni)
	cfg, err = ConfigFromEnv(env(map[string]string{"CHAOS_PATRONI": "1"}))
	require.NoError(t, err)
	assert.True(t, cfg.Patroni)
	for k, v := range map[string]string{"CHAOS_SEED": "x", "CHAOS_FAULTS": "0", "CHAOS_DURATION": "-1s", "CHAOS_PATRONI": "yes"} {
		_, err := ConfigFromEnv(env(map[string]string{k: v}))
		require.Error(t, err, k)
		assert.Contains(t, err.Error(), k+"=")
	}
}

func TestWorkloadBoundsAndSpecs(t *testing.T) {
	for _, d := range workloadDAGs {
		assert.Positive(t, d.bound(), d.id)
		spec := d.spec("/x/task.sh", "/x/journal.log")
		assert.True(t, strings.HasPrefix(spec, "dag_id: chaos-"+d.id+"\n"), spec)
	}
	sched := scheduledDAG
	sched.start = time.Date(2026, 11, 27, 15, 0, 2, 0, time.UTC)
	for _, d := range append(slices.Clone(workloadDAGs), sched) {
		_, err := dag.Parse([]byte(d.spec("/x/task.sh", "/x/journal.log")))
		require.NoError(t, err, "the DAG parser takes %s", d.id)
	}
	assert.Contains(t, sched.spec("/x/task.sh", "/x/journal.log"),
		"dag_id: chaos-tick\nschedule: \"@every 3s\"\nstart_date: 2026-11-27T15:00:02Z\ncatchup: true\nmax_active_runs: 32\ntasks:\n")
	// chain: c1 8s+1s, c2 fails first (2×3s + 1s), c3 1.2s+1s.
	assert.Equal(t, 9*time.Second+7*time.Second+2200*time.Millisecond, workloadDAGs[1].bound())
}

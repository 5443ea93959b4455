package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestStaleBacklogCountsWhatAnActiveAgentCouldRun: StaleBacklog counts,
// per task pool, each stale queued TI whose tags an active agent covers,
// and leaves out the ones no agent could run (dispatch-lost candidates).
func TestStaleBacklogCountsWhatAnActiveAgentCouldRun(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t) // a store holding the fence at epoch 1
	st, ctx := e.st, e.ctx
	storetest.Agent(t, st, store.Registration{Name: "linux-box", Tags: []string{"linux"}, Capacity: 1})
	spec, err := dag.Parse([]byte("dag_id: tags\nmax_active_tasks: 10\ntasks:\n" +
		"  - id: a\n    command: [\"true\"]\n    tags: [linux]\n" +
		"  - id: b\n    command: [\"true\"]\n    tags: [linux]\n" +
		"  - id: gpu\n    command: [\"true\"]\n    tags: [gpu]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	_, err = st.TriggerRun(ctx, "tags")
	require.NoError(t, err)
	for {
		res, err := st.ScheduleDirty(ctx, 1, 100)
		require.NoError(t, err)
		if res.Runs == 0 {
			break
		}
	}
	now, err := st.Now(ctx)
	require.NoError(t, err)

	pools, err := st.StaleBacklog(ctx, now.Add(10*time.Minute), time.Minute, time.Hour)
	require.NoError(t, err)
	require.Len(t, pools, 1, "one pool, the TIs of no pool")
	assert.Equal(t, "", pools[0].Pool)
	assert.Equal(t, 2, pools[0].Count, "a and b wait for the linux agent; gpu waits for nobody")
	assert.False(t, pools[0].Oldest.After(now))
}

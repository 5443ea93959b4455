package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestHeartbeatsHaveTheirOwnPool: with every connection of the main pool
// taken (bulk work), a heartbeat under store.Priority still runs, on the
// heartbeat pool; the same heartbeat without it waits for the main pool.
func TestHeartbeatsHaveTheirOwnPool(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.OpenWithOptions(ctx, storetest.DB(t), store.Options{Pools: store.Pools{MaxConns: 2, HeartbeatConns: 1}})
	require.NoError(t, err)
	defer st.Close()
	agentID := storetest.Agent(t, st, store.Registration{Name: "hb", Capacity: 1})
	release, err := st.HoldMainPoolForTest(ctx)
	require.NoError(t, err)
	defer release()

	pctx, cancel := context.WithTimeout(store.Priority(ctx), 10*time.Second)
	defer cancel()
	assert.ErrorIs(t, st.CheckAgentCredential(pctx, agentID, "wrong"), store.ErrForbidden,
		"the credential check of a heartbeat runs on the heartbeat pool too")
	_, _, err = st.Heartbeat(pctx, agentID, nil)
	require.NoError(t, err, "a heartbeat finds its own pool free")

	wctx, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	_, _, err = st.Heartbeat(wctx, agentID, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "without Priority it waits for the held main pool")
}

// TestPoolsResolve: defaults, and bounds naming the flag.
func TestPoolsResolve(t *testing.T) {
	t.Parallel()
	p, err := store.Pools{}.Resolve()
	require.NoError(t, err)
	assert.Equal(t, store.Pools{MaxConns: store.DefaultMaxConns, HeartbeatConns: store.DefaultHeartbeatConns}, p)
	_, err = store.Pools{MaxConns: -1}.Resolve()
	assert.ErrorContains(t, err, "db-max-conns: -1 is outside 1..1000")
	_, err = store.Pools{HeartbeatConns: 1001}.Resolve()
	assert.ErrorContains(t, err, "db-heartbeat-conns: 1001 is outside 1..1000")
}

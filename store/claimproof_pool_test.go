package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// The claim-path proofs of claimproof_test.go, extended to task pools and
// priority_weight (docs/pools.md): a deep queue of a full pool, and a deep
// queue of low-weight work ahead of a little high-weight work, cost the
// claim a bounded number of rows; a claim whose only work waits on a full
// pool writes nothing.

// poolClaimSeed queues deep/2 TIs of pool db (0 slots: full) with weight
// 100, then deep/2 TIs of no pool with weight 1, then fit TIs of no pool
// with weight 10, and registers an agent with no tags and capacity 10. No
// TI needs a tag: every one fits the agent, so only the pool and the
// weights decide what it takes.
func poolClaimSeed(t *testing.T, url string, deep, fit int) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var runID int64
	require.NoError(t, conn.QueryRow(ctx, `
		WITH d AS (INSERT INTO dags (dag_id, spec, spec_hash, max_active_tasks) VALUES ('deep', '{}', 'seed', 1000000)),
		p AS (INSERT INTO task_pools (name, slots) VALUES ('db', 0))
		INSERT INTO runs (dag_id, state, max_active_tasks, start_date) VALUES ('deep', 'running', 1000000, now())
		RETURNING id`).Scan(&runID))
	_, err = conn.Exec(ctx, `
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, command, state, queued_at, pool, priority_weight)
		SELECT $1, 'deep', 'pooled' || g, g, '{true}', 'queued', now() - interval '2 days' + g * interval '1 ms', 'db', 100
		  FROM generate_series(1, $2) g`, runID, deep/2)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, command, state, queued_at, priority_weight)
		SELECT $1, 'deep', 'low' || g, $2 + g, '{true}', 'queued', now() - interval '1 day' + g * interval '1 ms', 1
		  FROM generate_series(1, $2) g`, runID, deep/2)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, command, state, queued_at, priority_weight)
		SELECT $1, 'deep', 'high' || g, $2 + g, '{true}', 'queued', now() + g * interval '1 ms', 10
		  FROM generate_series(1, $3) g`, runID, deep, fit)
	require.NoError(t, err)
	for _, q := range []string{
		`ALTER TABLE task_instances SET (autovacuum_enabled = false)`,
		`ALTER TABLE agents SET (autovacuum_enabled = false)`,
		`VACUUM ANALYZE task_instances`,
	} {
		_, err = conn.Exec(ctx, q)
		require.NoError(t, err)
	}
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	defer st.Close()
	return storetest.Agent(t, st, store.Registration{Name: "any", Capacity: 10})
}

// TestPoolAndPriorityClaimReadsBoundedRows: behind 1,000 or 10,000 TIs of
// a full pool that sort first, and as many of weight 1, the claim takes
// the two oldest of weight 10, reading as few task_instances rows at
// either depth, and never the full pool's.
func TestPoolAndPriorityClaimReadsBoundedRows(t *testing.T) {
	t.Parallel()
	var reads []int64
	for _, deep := range []int{2000, 20000} {
		url := storetest.DB(t)
		agentID := poolClaimSeed(t, url, deep, 3)
		obs := newObserver(t, url)
		c, got, d := measureRound(t, obs, url, agentID, 2)
		require.Len(t, got, 2)
		assert.True(t, c.Queued)
		assert.ElementsMatch(t, []string{"high1", "high2"}, []string{got[0].TaskID, got[1].TaskID}, "the highest weight, oldest first")
		ti := d["task_instances"]
		t.Logf("deep backlog %d: task_instances %s", deep, ti)
		assert.Zero(t, ti.SeqScan, "no sequential scan")
		assert.Contains(t, ti.UsedIndexes(), "ti_queued_tags_idx")
		n := ti.HeapRows() + ti.IndexRows()
		assert.LessOrEqual(t, n, int64(40), "rows read by a claim of 2")
		assert.Zero(t, d["task_pools"].Upd, "nothing taken from the full pool, so its row is not written")
		reads = append(reads, n)
	}
	assert.LessOrEqual(t, reads[1]-reads[0], int64(probeSlack), "rows read do not grow with the backlog")
}

// TestClaimOfOnlyAFullPoolWritesNothing: with only a full pool's TIs
// queued (10,000 of them), a claim round reads a bounded number of rows,
// says nothing is queued that the agent could take, and writes no row:
// no pool lock is taken, no release folded, no agent stamped.
func TestClaimOfOnlyAFullPoolWritesNothing(t *testing.T) {
	t.Parallel()
	url := storetest.DB(t)
	agentID := poolClaimSeed(t, url, 20000, 0)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `DELETE FROM task_instances WHERE pool = ''`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `VACUUM ANALYZE task_instances`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	obs := newObserver(t, url)
	c, got, d := measureRound(t, obs, url, agentID, 5)
	assert.Empty(t, got)
	assert.False(t, c.Queued, "a full pool's TIs are not work the agent could take")
	assert.Equal(t, 10, c.Room)
	for table, s := range d {
		assert.Zerof(t, s.Ins+s.Upd+s.Del, "%s: rows written by a claim of a full pool: %s", table, s)
	}
	ti := d["task_instances"]
	assert.LessOrEqual(t, ti.HeapRows()+ti.IndexRows(), int64(20), "task_instances: %s", ti)
}

package store_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// A heartbeat's work is linear in the attempts it lists, whatever plan the
// statistics lead to. Statistics taken before the claims (every TI
// unclaimed, as after any mass claim autovacuum has not seen yet) make the
// planner expect one running TI per agent; excluding the listed attempts
// from the agent's running TIs then ran as a nested loop over them, about
// n²/2 comparisons (499,500 rows removed by its join filter at n = 1,000,
// 67 of the statement's 78 ms). Both statements run for real under
// EXPLAIN ANALYZE, custom and generic plans, in a transaction rolled back.
func TestHeartbeatWorkIsLinearInItsAttempts(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	const n = 1000
	e.apply(storetest.WideDAGYAML("hb1000", n))
	e.trigger("hb1000")
	agent, _, _, err := e.st.RegisterAgent(e.ctx, store.Registration{Name: "hb", Capacity: n})
	require.NoError(t, err)
	_, err = e.raw.Exec(e.ctx, `ANALYZE`) // statistics from before the claims
	require.NoError(t, err)
	e.tick()
	tasks, err := e.st.Claim(e.ctx, agent, n)
	require.NoError(t, err)
	require.Len(t, tasks, n)
	ids := make([]int64, n)
	attempts := make([]string, n)
	started := make([]bool, n)
	for i, tk := range tasks {
		ids[i], attempts[i], started[i] = tk.TIID, tk.AttemptID, true
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		tx, err := e.raw.Begin(e.ctx)
		require.NoError(t, err)
		_, err = tx.Exec(e.ctx, `SET LOCAL plan_cache_mode = `+mode)
		require.NoError(t, err)
		// The last attempt is left out, as an agent leaves out one whose
		// claim reply it lost: its stamp must stay the claim's.
		work := explainWork(t, tx, mode, store.HeartbeatSQLForTest, agent, ids[:n-1], attempts[:n-1], started[:n-1])
		work += explainWork(t, tx, mode, store.HeartbeatOldestSQLForTest, agent)
		var fresh int
		var oldestIsClaim bool
		require.NoError(t, tx.QueryRow(e.ctx, `
			SELECT (SELECT count(*) FROM task_instances WHERE agent_id = $1 AND last_heartbeat_at = now() AND started_at = now()),
			       (SELECT oldest_heartbeat_at = (SELECT last_heartbeat_at FROM task_instances WHERE id = $2) FROM agents WHERE id = $1)`,
			agent, ids[n-1]).Scan(&fresh, &oldestIsClaim))
		require.NoError(t, tx.Rollback(e.ctx))
		t.Logf("heartbeat of %d attempts, %s: %.0f rows of work", n-1, mode, work)
		assert.LessOrEqual(t, work, float64(20*n), "%s: work must be linear in the attempts, not their square", mode)
		assert.Equal(t, n-1, fresh, "%s: every listed attempt is stamped and started", mode)
		assert.True(t, oldestIsClaim, "%s: the agent's oldest stamp is the unlisted attempt's claim", mode)
	}
}

// explainWork runs sql under EXPLAIN (ANALYZE, FORMAT JSON) in tx and
// returns its rows of work (planWork).
func explainWork(t *testing.T, tx pgx.Tx, mode, sql string, args ...any) float64 {
	t.Helper()
	var out []byte
	require.NoError(t, tx.QueryRow(t.Context(), `EXPLAIN (ANALYZE, FORMAT JSON) `+sql, args...).Scan(&out), mode)
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(out, &plan), mode)
	return planWork(plan[0].Plan)
}

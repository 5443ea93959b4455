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
// unclaimed, as after any mass claim autovacuum has not analysed yet) make
// the planner expect one running TI per agent. A heartbeat written as one
// statement joined the listed attempts with the agent's TIs, and the
// planner looped over the listed attempts for each TI: n² rows (1,019,490
// rows of work here at n = 999; 128 ms a call at 1,000 in make bench). Each
// statement of Heartbeat runs for real under EXPLAIN ANALYZE, custom and
// generic plans, in a transaction rolled back, with the listed attempts
// in descending id order, as a map walk may send them.
func TestHeartbeatWorkIsLinearInItsAttempts(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	const n = 1000
	agent, tasks := claimedAfterStaleStatistics(e, "hb", n)
	// The last attempt is left out, as an agent leaves out one whose
	// claim reply it lost: its stamp must stay the claim's. Half the rest
	// report their start.
	ids := make([]int64, 0, n-1)
	for i := n - 2; i >= 0; i-- {
		ids = append(ids, tasks[i].TIID)
	}
	starts := ids[:n/2]
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		tx, err := e.raw.Begin(e.ctx)
		require.NoError(t, err)
		_, err = tx.Exec(e.ctx, `SET LOCAL plan_cache_mode = `+mode)
		require.NoError(t, err)
		work := explainWork(t, tx, mode, store.HeartbeatLockSQLForTest, agent, ids)
		work += explainWork(t, tx, mode, store.HeartbeatRefreshSQLForTest, ids[n/2:])
		work += explainWork(t, tx, mode, store.HeartbeatStartSQLForTest, starts)
		work += explainWork(t, tx, mode, store.HeartbeatOldestSQLForTest, agent)
		var fresh, started int
		var oldestIsClaim bool
		require.NoError(t, tx.QueryRow(e.ctx, `
			SELECT (SELECT count(*) FROM task_instances WHERE agent_id = $1 AND last_heartbeat_at = now()),
			       (SELECT count(*) FROM task_instances WHERE agent_id = $1 AND started_at = now()),
			       (SELECT oldest_heartbeat_at = (SELECT last_heartbeat_at FROM task_instances WHERE id = $2) FROM agents WHERE id = $1)`,
			agent, tasks[n-1].TIID).Scan(&fresh, &started, &oldestIsClaim))
		require.NoError(t, tx.Rollback(e.ctx))
		t.Logf("heartbeat of %d attempts, %s: %.0f rows of work", n-1, mode, work)
		assert.LessOrEqual(t, work, float64(20*n), "%s: work must be linear in the attempts, not their square", mode)
		assert.Equal(t, n-1, fresh, "%s: every listed attempt is stamped", mode)
		assert.Equal(t, n/2, started, "%s: every first start is recorded", mode)
		assert.True(t, oldestIsClaim, "%s: the agent's oldest stamp is the unlisted attempt's claim", mode)
	}
}

// A batch of completions does work linear in its size under the same
// statistics. The batched success statement used to join the batch with
// the agent's TIs, the shape the planner ran as a loop per TI in the
// heartbeat; under this test's plans that join happened to be hashed
// (16,991 rows of work against 9,999 now), so this guards the property
// rather than replaying a failure.
func TestCompletionBatchWorkIsLinear(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	const n = 1000
	agent, tasks := claimedAfterStaleStatistics(e, "cb", n)
	// The batch holds n-1 successes in descending id order; the last has
	// a stale attempt id and must be left alone.
	var ids []int64
	var attempts []string
	var codes []int
	for i := n - 1; i >= 0; i-- {
		ids, attempts, codes = append(ids, tasks[i].TIID), append(attempts, tasks[i].AttemptID), append(codes, int(tasks[i].TIID%3))
	}
	attempts[0] = "00000000-0000-0000-0000-000000000000"
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		tx, err := e.raw.Begin(e.ctx)
		require.NoError(t, err)
		_, err = tx.Exec(e.ctx, `SET LOCAL plan_cache_mode = `+mode)
		require.NoError(t, err)
		work := explainWork(t, tx, mode, store.CompleteSuccessSQLForTest, agent, ids, attempts, codes)
		var succeeded, codesRight int
		require.NoError(t, tx.QueryRow(e.ctx, `
			SELECT count(*), count(*) FILTER (WHERE exit_code = id % 3)
			  FROM task_instances WHERE agent_id = $1 AND state = 'success'`, agent).Scan(&succeeded, &codesRight))
		require.NoError(t, tx.Rollback(e.ctx))
		t.Logf("completion batch of %d, %s: %.0f rows of work", n, mode, work)
		assert.LessOrEqual(t, work, float64(20*n), "%s: work must be linear in the batch, not its square", mode)
		assert.Equal(t, n-1, succeeded, "%s: every current attempt succeeds, the stale one does not", mode)
		assert.Equal(t, n-1, codesRight, "%s: each TI gets its own exit code", mode)
	}
}

// claimedAfterStaleStatistics has one agent named name claim all n TIs of
// a run of a wide DAG, with the planner's statistics taken before the
// claims: they say no TI runs on any agent.
func claimedAfterStaleStatistics(e *schedEnv, name string, n int) (int64, []store.ClaimedTask) {
	t := e.t
	e.apply(storetest.WideDAGYAML(name+"-wide", n))
	e.trigger(name + "-wide")
	agent := storetest.Agent(t, e.st, store.Registration{Name: name, Capacity: n})
	_, err := e.raw.Exec(e.ctx, `ANALYZE`)
	require.NoError(t, err)
	e.tick()
	tasks, err := e.st.Claim(e.ctx, agent, n)
	require.NoError(t, err)
	require.Len(t, tasks, n)
	return agent, tasks
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

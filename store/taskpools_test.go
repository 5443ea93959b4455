package store_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// poolDAG is a DAG of n independent tasks t1..tn in pool (none when
// empty), each with weight w when w is not 0.
func poolDAG(id, pool string, n, w int) string {
	y := "dag_id: " + id + "\ntasks:\n"
	for i := 1; i <= n; i++ {
		y += fmt.Sprintf("  - id: t%d\n    command: [\"true\"]\n", i)
		if pool != "" {
			y += "    pool: " + pool + "\n"
		}
		if w != 0 {
			y += fmt.Sprintf("    priority_weight: %d\n", w)
		}
	}
	return y
}

func (e *schedEnv) setPool(name string, slots int) {
	_, err := e.st.SetTaskPool(e.ctx, name, slots, nil)
	require.NoError(e.t, err)
}

func (e *schedEnv) poolRunning(name string) int {
	p, err := e.st.GetTaskPool(e.ctx, name)
	require.NoError(e.t, err)
	assert.Equal(e.t, e.count(`SELECT count(*) FROM task_instances WHERE pool = $1 AND state = 'running'`, name), p.Running,
		"pool %s: the count of occupied less releases is the running TIs", name)
	return p.Running
}

func (e *schedEnv) claim(agentID int64, n int) []store.ClaimedTask {
	tasks, err := e.st.Claim(e.ctx, agentID, n)
	require.NoError(e.t, err)
	return tasks
}

func (e *schedEnv) succeed(agentID int64, t store.ClaimedTask) {
	_, _, err := e.st.Complete(e.ctx, agentID, store.Completion{Attempt: t.Attempt, Outcome: state.OutcomeSuccess})
	require.NoError(e.t, err)
}

// TestPoolCapsClaimsAcrossDAGsAndAgents: two DAGs share a pool of 2; two
// agents with room for 10 each take 2 of its TIs in all, and another
// only once one of them ends, while a TI without a pool is taken at once.
func TestPoolCapsClaimsAcrossDAGsAndAgents(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.setPool("db", 2)
	a1 := storetest.Agent(t, e.st, store.Registration{Name: "a1", Capacity: 10})
	a2 := storetest.Agent(t, e.st, store.Registration{Name: "a2", Capacity: 10})
	e.apply(poolDAG("left", "db", 3, 0))
	e.apply(poolDAG("right", "db", 3, 0))
	e.apply(poolDAG("free", "", 1, 0))
	e.trigger("left")
	e.trigger("right")
	e.trigger("free")
	e.tick()

	got1 := e.claim(a1, 1)
	require.Len(t, got1, 1)
	got2 := e.claim(a2, 10)
	require.Len(t, got2, 2, "the pool's second slot and the TI without a pool")
	assert.Empty(t, e.claim(a1, 10), "the pool is full")
	assert.Equal(t, 2, e.poolRunning("db"))
	c, err := e.st.Claimable(e.ctx, a1)
	require.NoError(t, err)
	assert.False(t, c.Queued, "a full pool's TIs are not work the agent could take")

	e.succeed(a1, got1[0])
	assert.Equal(t, 1, e.poolRunning("db"))
	got := e.claim(a1, 10)
	require.Len(t, got, 1, "one slot freed, one TI taken")
	assert.Equal(t, 2, e.poolRunning("db"))
}

// TestPoolShrunkBelowRunningAdmitsNothingUntilDrained: a pool of 2 with 2
// running is set to 1; one ending leaves 1 running, still no room; the
// second ending makes room for one.
func TestPoolShrunkBelowRunningAdmitsNothingUntilDrained(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.setPool("db", 2)
	a := storetest.Agent(t, e.st, store.Registration{Name: "a", Capacity: 10})
	e.apply(poolDAG("d", "db", 4, 0))
	e.trigger("d")
	e.tick()
	running := e.claim(a, 10)
	require.Len(t, running, 2)
	e.setPool("db", 1)
	e.succeed(a, running[0])
	assert.Empty(t, e.claim(a, 10), "1 running of 1 slot")
	e.succeed(a, running[1])
	require.Len(t, e.claim(a, 10), 1, "drained below the new slots")
	assert.Equal(t, 1, e.poolRunning("db"))
}

// TestConcurrentClaimSeesTheSlotTakenWhileItWaited: a claim that waits on
// the pool row while another transaction takes the last slot must count
// that slot although its snapshot is older: it takes nothing. The other
// transaction is a claim's own write, made by hand so the interleaving
// is explicit: lock the pool row, take the slot, and commit only once the
// claim is seen waiting on that lock.
func TestConcurrentClaimSeesTheSlotTakenWhileItWaited(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.setPool("db", 1)
	a := storetest.Agent(t, e.st, store.Registration{Name: "a", Capacity: 10})
	e.apply(poolDAG("d", "db", 2, 0))
	e.trigger("d")
	e.tick()

	tx, err := e.raw.Begin(e.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(e.ctx) }()
	_, err = tx.Exec(e.ctx, `SELECT 1 FROM task_pools WHERE name = 'db' FOR NO KEY UPDATE`)
	require.NoError(t, err)
	_, err = tx.Exec(e.ctx, `
		WITH one AS (SELECT id FROM task_instances WHERE pool = 'db' AND state = 'queued' ORDER BY id LIMIT 1),
		p AS (UPDATE task_pools SET occupied = occupied + 1 WHERE name = 'db')
		UPDATE task_instances t SET state = 'running', agent_id = $1, attempt_id = gen_random_uuid(),
		       claimed_at = now(), last_heartbeat_at = now()
		  FROM one WHERE t.id = one.id`, a)
	require.NoError(t, err)

	type result struct {
		tasks []store.ClaimedTask
		err   error
	}
	done := make(chan result, 1)
	go func() {
		tasks, err := e.st.Claim(e.ctx, a, 10)
		done <- result{tasks, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("the claim returned while the pool row was locked: %d tasks, err %v", len(r.tasks), r.err)
	default:
	}
	waitForLockWait(t, e, "sets(tags, pool")
	require.NoError(t, tx.Commit(e.ctx))
	r := <-done
	require.NoError(t, r.err)
	assert.Empty(t, r.tasks, "the slot was taken while the claim waited")
	assert.Equal(t, 1, e.poolRunning("db"))
}

// waitForLockWait waits until some session whose query's text (its
// first 1,024 bytes, track_activity_query_size) contains text waits for
// a lock.
func waitForLockWait(t *testing.T, e *schedEnv, text string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := e.count(`SELECT count(*) FROM pg_stat_activity
			 WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0 AND pid <> pg_backend_pid()`, text)
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			var act string
			_ = e.raw.QueryRow(e.ctx, `SELECT coalesce(string_agg(coalesce(wait_event_type, '-') || '/' || coalesce(wait_event, '-') || ': ' || left(query, 60), E'\n'), '')
				 FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = current_database()`).Scan(&act)
			t.Fatalf("no session running %q waits on a lock; sessions:\n%s", text, act)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestClaimTakesHigherPriorityFirst: of TIs queued in order low, mid,
// high, the claim takes high, then mid, then low, within a tag set (low
// and mid) and across tag sets (high needs x); within one weight, the
// oldest first.
func TestClaimTakesHigherPriorityFirst(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	a := storetest.Agent(t, e.st, store.Registration{Name: "a", Capacity: 10, Tags: []string{"x"}})
	e.apply(poolDAG("low", "", 1, -5))
	e.apply("dag_id: high\ntasks:\n  - id: t1\n    command: [\"true\"]\n    tags: [x]\n    priority_weight: 100\n")
	e.apply(poolDAG("mid", "", 2, 0))
	for _, d := range []string{"low", "mid", "high"} {
		e.trigger(d)
		e.tick()
	}
	var order []string
	for range 4 {
		got := e.claim(a, 1)
		require.Len(t, got, 1)
		order = append(order, got[0].DAGID+"."+got[0].TaskID)
	}
	assert.Equal(t, []string{"high.t1", "mid.t1", "mid.t2", "low.t1"}, order)
}

// TestApplyRefusesAMissingPoolAndDeleteAPoolInUse: dags apply names the
// DAG, task and field of a pool that does not exist; pools delete refuses
// a pool a DAG names or whose TIs have not ended, and deletes it after.
func TestApplyRefusesAMissingPoolAndDeleteAPoolInUse(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	spec, err := dag.Parse([]byte(poolDAG("d", "db", 1, 0)))
	require.NoError(t, err)
	_, err = e.st.ApplyDAG(e.ctx, spec)
	var missing *store.MissingPoolsError
	require.ErrorAs(t, err, &missing)
	assert.Contains(t, err.Error(), `dag "d": task "t1": pool: no such pool "db"`)

	e.setPool("db", 1)
	e.apply(poolDAG("d", "db", 1, 0))
	e.trigger("d")
	err = e.st.DeleteTaskPool(e.ctx, "db")
	var inUse *store.PoolInUseError
	require.ErrorAs(t, err, &inUse)
	assert.Equal(t, []string{"d task t1"}, inUse.DAGs)
	assert.Equal(t, 1, inUse.LiveTIs)

	e.apply(poolDAG("d", "", 1, 0))
	err = e.st.DeleteTaskPool(e.ctx, "db")
	require.ErrorAs(t, err, &inUse, "the run's TI still names it")
	assert.Empty(t, inUse.DAGs)
	_, err = e.raw.Exec(e.ctx, `UPDATE task_instances SET state = 'cancelled' WHERE pool = 'db'`)
	require.NoError(t, err)
	require.NoError(t, e.st.DeleteTaskPool(e.ctx, "db"))
	assert.ErrorIs(t, e.st.DeleteTaskPool(e.ctx, "db"), store.ErrNotFound)

	_, err = e.st.SetTaskPool(e.ctx, "bad name", 1, nil)
	assert.EqualError(t, err, `name: "bad name" `+dag.PoolNameRule)
	_, err = e.st.SetTaskPool(e.ctx, "p", -1, nil)
	var pe *store.PoolError
	require.True(t, errors.As(err, &pe))
	assert.Equal(t, "slots", pe.Field)
}

// TestDeleteDAGKeepsItsEndedRuns: a DAG with a live run is refused,
// naming the run and the cancel command; once it ended, the DAG and its
// schedule go, its run stays, and a trigger finds no DAG.
func TestDeleteDAGKeepsItsEndedRuns(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(poolDAG("d", "", 1, 0))
	run := e.trigger("d")
	err := e.st.DeleteDAG(e.ctx, "d")
	var live *store.LiveRunsError
	require.ErrorAs(t, err, &live)
	assert.Equal(t, []int64{run}, live.RunIDs)
	assert.Contains(t, err.Error(), "vigil runs cancel RUN_ID")

	_, err = e.st.CancelRun(e.ctx, run, state.ReasonCancelled, "cancelled by test")
	require.NoError(t, err)
	require.NoError(t, e.st.DeleteDAG(e.ctx, "d"))
	assert.Equal(t, 0, e.count(`SELECT count(*) FROM dags WHERE dag_id = 'd'`))
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM runs WHERE dag_id = 'd'`), "its ended run stays")
	_, err = e.st.TriggerRun(e.ctx, "d")
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.ErrorIs(t, e.st.DeleteDAG(e.ctx, "d"), store.ErrNotFound)

}

// TestRetentionPrunesTheRunsOfADeletedDAG: a deleted DAG's ended run is
// pruned by retention like any other, by age.
func TestRetentionPrunesTheRunsOfADeletedDAG(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(poolDAG("gone", "", 1, 0))
	run := e.trigger("gone")
	_, err := e.st.CancelRun(e.ctx, run, state.ReasonCancelled, "cancelled by test")
	require.NoError(t, err)
	require.NoError(t, e.st.DeleteDAG(e.ctx, "gone"))
	_, err = e.raw.Exec(e.ctx, `UPDATE runs SET end_date = now() - interval '40 days' WHERE id = $1`, run)
	require.NoError(t, err)
	n, err := e.st.PruneRuns(e.ctx, 1, 30*24*time.Hour, 100)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Equal(t, 0, e.count(`SELECT count(*) FROM runs WHERE id = $1`, run))
	assert.Equal(t, 0, e.count(`SELECT count(*) FROM task_instances WHERE run_id = $1`, run))
}

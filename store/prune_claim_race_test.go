package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// pruneRace is an agent that retention may prune (inactive, silent for
// two days) that ran one TI of an earlier run, and a queued TI it could
// claim if it came back. task_instances.agent_id has no foreign key
// (adr/0027), so the claim and PruneAgents themselves must keep every
// agent_id naming an agent row.
type pruneRace struct {
	*schedEnv
	agentID int64
	pastTI  int64 // the TI the agent ran, still naming it
	queued  int64 // the run whose one TI is queued
}

const pruneRaceDAG = "dag_id: one\ntasks:\n  - id: a\n    command: [\"true\"]\n"

func newPruneRace(t *testing.T) *pruneRace {
	t.Helper()
	e := newSchedEnv(t)
	e.apply(pruneRaceDAG)
	r := &pruneRace{schedEnv: e}
	past := e.trigger("one")
	e.tick()
	var err error
	r.agentID = storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 1})
	tasks, err := e.st.Claim(e.ctx, r.agentID, 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	_, _, err = e.st.Complete(e.ctx, r.agentID, store.Completion{Attempt: tasks[0].Attempt, Outcome: state.OutcomeSuccess})
	require.NoError(t, err)
	r.pastTI = tasks[0].TIID
	r.queued = e.trigger("one")
	e.tick()
	require.Equal(t, 1, e.tiCount(r.queued, string(state.TIQueued)))
	require.Equal(t, 1, e.tiCount(past, string(state.TISuccess)))
	_, err = e.raw.Exec(e.ctx, `UPDATE agents SET state = 'inactive', last_heartbeat_at = now() - interval '2 days' WHERE id = $1`, r.agentID)
	require.NoError(t, err)
	return r
}

// waitBlocked returns once n sessions of this test's database wait for a
// lock.
func (r *pruneRace) waitBlocked(n int) { waitLockWaiters(r.t, r.ctx, r.raw, n) }

func (r *pruneRace) prune() <-chan int {
	done := make(chan int, 1)
	go func() {
		n, err := r.st.PruneAgents(r.ctx, 1, 24*time.Hour, 500)
		assert.NoError(r.t, err)
		done <- n
	}()
	return done
}

func (r *pruneRace) claim() <-chan []store.ClaimedTask {
	done := make(chan []store.ClaimedTask, 1)
	go func() {
		tasks, err := r.st.Claim(r.ctx, r.agentID, 1)
		assert.NoError(r.t, err)
		done <- tasks
	}()
	return done
}

// dangling counts TIs naming an agent row that does not exist.
func (r *pruneRace) dangling() int {
	return r.count(`SELECT count(*) FROM task_instances t
		WHERE t.agent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.id = t.agent_id)`)
}

// A claim and the retention pass that prunes its agent serialise on the
// agent row, in either order, and no TI is left naming a deleted agent.
// The interleavings are explicit: a transaction of the test holds a row
// until the others are seen waiting for locks.
func TestPruneAgentsAndClaimSerialiseOnTheAgentRow(t *testing.T) {
	t.Parallel()

	t.Run("prune first: the claim finds no agent row and takes nothing", func(t *testing.T) {
		t.Parallel()
		r := newPruneRace(t)
		// The agent's past TI is held, so the prune stops after locking
		// the agent, before its unlink.
		tx, err := r.raw.Begin(r.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(r.ctx) }()
		_, err = tx.Exec(r.ctx, `SELECT 1 FROM task_instances WHERE id = $1 FOR UPDATE`, r.pastTI)
		require.NoError(t, err)
		pruned := r.prune()
		r.waitBlocked(1)
		// The claim's snapshot still sees the agent; it locks the queued TI
		// and waits for the agent row.
		claimed := r.claim()
		r.waitBlocked(2)
		require.NoError(t, tx.Commit(r.ctx))

		assert.Equal(t, 1, <-pruned)
		assert.Empty(t, <-claimed, "a claim for a pruned agent took a TI")
		assert.Equal(t, 1, r.tiCount(r.queued, string(state.TIQueued)), "the queued TI stays queued")
		assert.Zero(t, r.count(`SELECT count(*) FROM events WHERE run_id = $1 AND kind = 'ti_claimed'`, r.queued))
		assert.Zero(t, r.count(`SELECT count(*) FROM task_instances WHERE id = $1 AND agent_id IS NOT NULL`, r.pastTI),
			"the pruned agent's past TI is unlinked")
		assert.Zero(t, r.dangling())
	})

	t.Run("claim first: the agent it made active is not pruned", func(t *testing.T) {
		t.Parallel()
		r := newPruneRace(t)
		// The agent row is held, so the claim waits for it first and the
		// prune, whose snapshot sees a prunable agent, queues behind it.
		tx, err := r.raw.Begin(r.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(r.ctx) }()
		_, err = tx.Exec(r.ctx, `SELECT 1 FROM agents WHERE id = $1 FOR NO KEY UPDATE`, r.agentID)
		require.NoError(t, err)
		claimed := r.claim()
		r.waitBlocked(1)
		pruned := r.prune()
		r.waitBlocked(2)
		require.NoError(t, tx.Commit(r.ctx))

		tasks := <-claimed
		assert.Zero(t, <-pruned, "the prune deleted an agent a claim had just made active")
		require.Len(t, tasks, 1)
		assert.Equal(t, 1, r.count(`SELECT count(*) FROM task_instances WHERE id = $1 AND state = 'running' AND agent_id = $2`,
			tasks[0].TIID, r.agentID))
		assert.Equal(t, 1, r.count(`SELECT count(*) FROM agents WHERE id = $1 AND state = 'active'`, r.agentID))
		assert.Zero(t, r.dangling())
	})
}

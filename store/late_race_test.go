package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// lateRace is a run of a -> b (plus z, which keeps the run alive) whose a
// the agent-lost reaper failed while its agent was cut off: b is still
// 'none' and the run is marked dirty, so the next scheduler pass would
// mark b upstream_failed, while the agent's success for a is on its way.
type lateRace struct {
	// late, when set, runs as the store's LateAccepted test signal.
	late    func(ctx context.Context)
	ctx     context.Context
	st      *store.Store
	raw     *pgxpool.Pool
	runID   int64
	agentID int64
	a       store.Attempt
}

func newLateRace(t *testing.T) *lateRace {
	t.Helper()
	r := &lateRace{}
	// a store holding epoch 1 and a raw pool
	e := newSchedEnvWith(t, store.TestSignals{LateAccepted: func(ctx context.Context) {
		if r.late != nil {
			r.late(ctx)
		}
	}})
	ctx, st, raw := e.ctx, e.st, e.raw
	spec, err := dag.Parse([]byte("dag_id: chain\ntasks:\n  - id: a\n    command: [\"true\"]\n" +
		"  - id: b\n    command: [\"true\"]\n    depends_on: [a]\n  - id: z\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	run, err := st.TriggerRun(ctx, "chain")
	require.NoError(t, err)
	r.ctx, r.st, r.raw, r.runID = ctx, st, raw, run.ID
	r.drain(t)
	r.agentID = storetest.Agent(t, st, store.Registration{Name: "w", Capacity: 1})
	tasks, err := st.Claim(ctx, r.agentID, 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	require.Equal(t, "a", tasks[0].TaskID)
	r.a = tasks[0].Attempt
	_, _, err = st.Heartbeat(ctx, r.agentID, []store.HeartbeatEntry{{Attempt: r.a, Started: true}})
	require.NoError(t, err)
	ti := r.ti(t, "a")
	landed, err := st.ApplyReap(ctx, 1, store.Reap{
		TIID: ti.ID, RunID: r.runID, TaskID: "a", TryNumber: ti.TryNumber, AttemptID: r.a.AttemptID, AgentID: ti.AgentID,
		State: state.TIFailed, Reason: state.ReasonAgentLost, Message: "agent silent", EventKind: "agent_lost",
		WhereState: state.TIRunning, WhereStamp: *ti.LastHeartbeatAt, StampColumn: store.StampHeartbeat,
	})
	require.NoError(t, err)
	require.True(t, landed)
	require.Equal(t, state.TINone, r.ti(t, "b").State, "no pass has resolved b yet")
	return r
}

// drain runs scheduler passes until no run is dirty.
func (r *lateRace) drain(t *testing.T) {
	t.Helper()
	for {
		res, err := r.st.ScheduleDirty(r.ctx, 1, 100)
		require.NoError(t, err)
		if res.Runs == 0 {
			return
		}
	}
}

func (r *lateRace) ti(t *testing.T, taskID string) store.TaskInstance {
	t.Helper()
	return tiNamed(t, r.ctx, r.st, r.runID, taskID)
}

func (r *lateRace) events(t *testing.T, kind, taskID string) int {
	t.Helper()
	var n int
	require.NoError(t, r.raw.QueryRow(r.ctx, `SELECT count(*) FROM events WHERE run_id = $1 AND kind = $2 AND task_id = $3`,
		r.runID, kind, taskID).Scan(&n))
	return n
}

// waitBlocked returns once a session of this test's database waits for a
// lock: the other side of the interleaving is parked behind the run row.
func (r *lateRace) waitBlocked(t *testing.T) { waitLockWaiters(t, r.ctx, r.raw, 1) }

// waitLockWaiters returns once n sessions of the database raw connects to
// wait for a lock, and fails t after 20 s: a side of an explicit
// interleaving is parked.
func waitLockWaiters(t *testing.T, ctx context.Context, raw *pgxpool.Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var waiting int
		require.NoError(t, raw.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		if waiting >= n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("fewer than %d sessions ever waited for a lock", n)
}

func (r *lateRace) completeLate() <-chan error {
	done := make(chan error, 1)
	go func() {
		st, late, err := r.st.Complete(r.ctx, r.agentID, store.Completion{Attempt: r.a, Outcome: state.OutcomeSuccess})
		if err == nil && (!late || st != state.TISuccess) {
			err = assert.AnError
		}
		done <- err
	}()
	return done
}

// A dependency-resolution pass and a late success of
// the upstream serialise on the run row, which both lock first (FOR NO
// KEY UPDATE), in either order. The interleavings are explicit: one side
// holds its transaction open until the other is seen waiting for the lock.
func TestLateSuccessSerialisesWithDependencyResolution(t *testing.T) {
	t.Parallel()

	t.Run("pass first: the late success reopens what the pass marked", func(t *testing.T) {
		t.Parallel()
		r := newLateRace(t)
		tx, err := r.raw.Begin(r.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(r.ctx) }()
		res, err := store.ScheduleRunsForTest(r.ctx, tx, []int64{r.runID})
		require.NoError(t, err)
		require.Equal(t, 1, res.Resolved, "the open pass marked b upstream_failed")

		done := r.completeLate()
		r.waitBlocked(t)
		select {
		case err := <-done:
			t.Fatalf("the late success committed while the pass held the run: %v", err)
		default:
		}
		require.NoError(t, tx.Commit(r.ctx))
		require.NoError(t, <-done)

		assert.Equal(t, state.TISuccess, r.ti(t, "a").State)
		assert.Equal(t, state.TINone, r.ti(t, "b").State, "b was reopened after the pass committed")
		assert.Equal(t, 1, r.events(t, string(state.EventTIReopened), "b"))
		r.drain(t)
		assert.Equal(t, state.TIQueued, r.ti(t, "b").State)
	})

	t.Run("late first: the pass sees the success and never fails b", func(t *testing.T) {
		t.Parallel()
		r := newLateRace(t)
		holding, release := make(chan struct{}), make(chan struct{})
		r.late = func(context.Context) {
			close(holding)
			<-release
		}
		done := r.completeLate()
		<-holding // the late success is written, uncommitted, holding the run row

		tick := make(chan error, 1)
		go func() {
			_, err := r.st.ScheduleDirty(r.ctx, 1, 100)
			tick <- err
		}()
		r.waitBlocked(t)
		select {
		case err := <-tick:
			t.Fatalf("the pass finished while the late success held the run: %v", err)
		default:
		}
		close(release)
		require.NoError(t, <-done)
		require.NoError(t, <-tick)

		assert.Equal(t, state.TISuccess, r.ti(t, "a").State)
		assert.Equal(t, state.TIQueued, r.ti(t, "b").State, "the pass resolved b against the committed success")
		assert.Zero(t, r.events(t, "ti_upstream_failed", "b"), "b was never marked upstream_failed")
		assert.Zero(t, r.events(t, string(state.EventTIReopened), "b"))
	})
}

// A success of the attempt a reaper gave up on is taken late only when
// the reaper judged its agent unreachable (agent_lost, dispatch_lost);
// an attempt failed for another reason (here its execution timeout)
// stays failed and the completion is refused as stale.
func TestLateSuccessEligibilityFollowsTheReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reason   state.Reason
		accepted bool
	}{
		{state.ReasonAgentLost, true},
		{state.ReasonDispatchLost, true},
		{state.ReasonExecutionTimeout, false},
	} {
		t.Run(string(tc.reason), func(t *testing.T) {
			t.Parallel()
			r := newLateRace(t)
			_, err := r.raw.Exec(r.ctx, `UPDATE task_instances SET reason = $1 WHERE run_id = $2 AND task_id = 'a'`,
				string(tc.reason), r.runID)
			require.NoError(t, err)
			got, late, err := r.st.Complete(r.ctx, r.agentID, store.Completion{Attempt: r.a, Outcome: state.OutcomeSuccess})
			if !tc.accepted {
				var stale *store.StaleAttemptError
				require.ErrorAs(t, err, &stale)
				assert.Equal(t, state.TIFailed, r.ti(t, "a").State)
				return
			}
			require.NoError(t, err)
			assert.True(t, late)
			assert.Equal(t, state.TISuccess, got)
			assert.Equal(t, state.TISuccess, r.ti(t, "a").State)
		})
	}
}

// A completion whose write fails (here a trigger refuses its event; a
// broken connection or a full disk would too) returns that error, never
// *StaleAttemptError: stale is final to the agent, which would drop the
// completion, while any other error makes it send the completion again.
func TestACompletionWhoseWriteFailsIsNotCalledStale(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply("dag_id: one\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	_, err := e.st.TriggerRun(e.ctx, "one")
	require.NoError(t, err)
	_, err = e.st.ScheduleDirty(e.ctx, 1, 100)
	require.NoError(t, err)
	agentID := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 1})
	tasks, err := e.st.Claim(e.ctx, agentID, 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	_, _, err = e.st.Heartbeat(e.ctx, agentID, []store.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}})
	require.NoError(t, err)
	_, err = e.raw.Exec(e.ctx, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql
		AS $$BEGIN RAISE EXCEPTION 'refused by the test'; END$$`)
	require.NoError(t, err)
	_, err = e.raw.Exec(e.ctx, `CREATE TRIGGER refuse BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION refuse()`)
	require.NoError(t, err)

	_, _, err = e.st.Complete(e.ctx, agentID, store.Completion{Attempt: tasks[0].Attempt, Outcome: state.OutcomeSuccess})
	require.ErrorContains(t, err, "refused by the test")
	var stale *store.StaleAttemptError
	assert.False(t, errors.As(err, &stale), "a failed write is not a stale attempt: %v", err)
}

// A heartbeat that still lists an attempt the reaper gave up on gets a
// stop order for it, with the reason, and leaves the TI as the reaper
// left it.
func TestHeartbeatOfAReapedAttemptOrdersItsStop(t *testing.T) {
	t.Parallel()
	r := newLateRace(t)
	stops, _, err := r.st.Heartbeat(r.ctx, r.agentID, []store.HeartbeatEntry{{Attempt: r.a, Started: true}})
	require.NoError(t, err)
	require.Len(t, stops, 1)
	assert.Equal(t, r.a, stops[0].Attempt)
	assert.Equal(t, state.StopReaped, stops[0].Reason)
	assert.Equal(t, state.TIFailed, r.ti(t, "a").State)
}

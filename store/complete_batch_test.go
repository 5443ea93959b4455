package store_test

import (
	"errors"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestCompleteBatchRefusesAStaleAttemptAlone: one batch carries two
// current successes, a success for an attempt that is not current, a
// current failure with a retry left, and another agent's attempt. The
// stale and the foreign items are refused each with its own error while
// the others apply, each with its event, and the run is marked for the
// scheduler.
func TestCompleteBatchRefusesAStaleAttemptAlone(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	agentID := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 10})
	other := storetest.Agent(t, e.st, store.Registration{Name: "other", Capacity: 10})
	e.apply("dag_id: b\ntasks:\n" +
		"  - {id: a, command: [\"true\"]}\n  - {id: b, command: [\"true\"]}\n  - {id: c, command: [\"true\"]}\n" +
		"  - {id: d, command: [\"true\"], retries: 1}\n  - {id: e, command: [\"true\"]}\n")
	runID := e.trigger("b")
	e.tick()
	mine, err := e.st.Claim(e.ctx, agentID, 4)
	require.NoError(t, err)
	require.Len(t, mine, 4)
	theirs, err := e.st.Claim(e.ctx, other, 1)
	require.NoError(t, err)
	require.Len(t, theirs, 1)
	sort.Slice(mine, func(i, j int) bool { return mine[i].TaskID < mine[j].TaskID })
	byTask := map[string]store.Attempt{}
	for _, c := range append(mine, theirs...) {
		byTask[c.TaskID] = c.Attempt
	}
	_, err = e.raw.Exec(e.ctx, `DELETE FROM run_dirty`)
	require.NoError(t, err)

	zero, one := 0, 1
	stale := store.Attempt{TIID: byTask["b"].TIID, AttemptID: uuid.NewString()}
	res := e.st.CompleteBatch(e.ctx, agentID, []store.Completion{
		{Attempt: byTask["a"], Outcome: state.OutcomeSuccess, ExitCode: &zero},
		{Attempt: stale, Outcome: state.OutcomeSuccess, ExitCode: &zero},
		{Attempt: byTask["c"], Outcome: state.OutcomeSuccess, ExitCode: &zero},
		{Attempt: byTask["d"], Outcome: state.OutcomeFailed, ExitCode: &one},
		{Attempt: byTask["e"], Outcome: state.OutcomeSuccess, ExitCode: &zero},
	})
	require.Len(t, res, 5)
	assert.NoError(t, res[0].Err)
	assert.Equal(t, state.TISuccess, res[0].State)
	var staleErr *store.StaleAttemptError
	require.True(t, errors.As(res[1].Err, &staleErr), "%v", res[1].Err)
	assert.Equal(t, state.StopSuperseded, staleErr.Reason)
	assert.NoError(t, res[2].Err)
	assert.Equal(t, state.TISuccess, res[2].State)
	assert.NoError(t, res[3].Err)
	assert.Equal(t, state.TIUpForRetry, res[3].State)
	assert.ErrorIs(t, res[4].Err, store.ErrForbidden, "another agent's attempt")

	states := map[string]string{}
	rows, err := e.raw.Query(e.ctx, `SELECT task_id, state FROM task_instances WHERE run_id = $1`, runID)
	require.NoError(t, err)
	for rows.Next() {
		var id, st string
		require.NoError(t, rows.Scan(&id, &st))
		states[id] = st
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, map[string]string{"a": "success", "b": "running", "c": "success", "d": "up_for_retry", "e": "running"}, states)
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM task_instances WHERE id = $1 AND attempt_id = $2`, byTask["b"].TIID, byTask["b"].AttemptID),
		"the stale item left the current attempt alone")
	assert.Equal(t, 2, e.count(`SELECT count(*) FROM events WHERE run_id = $1 AND kind = 'ti_success' AND message LIKE 'try 1 succeeded'`, runID))
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM events WHERE run_id = $1 AND kind = 'ti_up_for_retry'`, runID))
	assert.Positive(t, e.count(`SELECT count(*) FROM run_dirty WHERE run_id = $1`, runID), "the run is marked for the scheduler")

	// A replay of the whole batch changes nothing: every item is stale now
	// or foreign.
	res = e.st.CompleteBatch(e.ctx, agentID, []store.Completion{
		{Attempt: byTask["a"], Outcome: state.OutcomeSuccess, ExitCode: &zero},
		{Attempt: byTask["c"], Outcome: state.OutcomeSuccess, ExitCode: &zero},
	})
	for i, r := range res {
		assert.True(t, errors.As(r.Err, &staleErr), "item %d: %v", i, r.Err)
	}
	assert.Equal(t, 2, e.count(`SELECT count(*) FROM events WHERE run_id = $1 AND kind = 'ti_success'`, runID))
}

// TestACompletionReportsAStartItsAgentWaived: an agent waives the start
// report of a process that exited before one was built (agent/task.go
// waiveStartReport), so a completion of a running TI whose started_at is
// NULL records the start itself, on the batch route (a success) and on
// the single one (a failure, with a retry left): started_at is set, in
// the completion's transaction, and no ti_started event is written (the
// attempt's start is its completion's time). A TI whose start was
// reported keeps the heartbeat's started_at and its one ti_started event.
func TestACompletionReportsAStartItsAgentWaived(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	agentID := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 10})
	e.apply("dag_id: ws\ntasks:\n" +
		"  - {id: a, command: [\"true\"]}\n  - {id: b, command: [\"true\"]}\n  - {id: c, command: [\"true\"], retries: 1}\n")
	runID := e.trigger("ws")
	e.tick()
	byTask := map[string]store.Attempt{}
	for _, c := range e.claim(agentID, 3) {
		byTask[c.TaskID] = c.Attempt
	}
	require.Len(t, byTask, 3)
	_, _, err := e.st.Heartbeat(e.ctx, agentID, []store.HeartbeatEntry{{Attempt: byTask["b"], Started: true}})
	require.NoError(t, err)
	var reported time.Time
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT started_at FROM task_instances WHERE id = $1`, byTask["b"].TIID).Scan(&reported))

	zero, one := 0, 1
	res := e.st.CompleteBatch(e.ctx, agentID, []store.Completion{
		{Attempt: byTask["a"], Outcome: state.OutcomeSuccess, ExitCode: &zero},
		{Attempt: byTask["b"], Outcome: state.OutcomeSuccess, ExitCode: &zero},
	})
	require.Len(t, res, 2)
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err)
	st, _, err := e.st.Complete(e.ctx, agentID, store.Completion{Attempt: byTask["c"], Outcome: state.OutcomeFailed, ExitCode: &one})
	require.NoError(t, err)
	require.Equal(t, state.TIUpForRetry, st)

	timeline := func(task string) []string {
		rows, err := e.raw.Query(e.ctx, `SELECT kind FROM events WHERE run_id = $1 AND task_id = $2 ORDER BY id`, runID, task)
		require.NoError(t, err)
		kinds, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return kinds
	}
	assert.Equal(t, []string{"ti_claimed", "ti_success"}, timeline("a"))
	assert.Equal(t, []string{"ti_claimed", "ti_started", "ti_success"}, timeline("b"))
	assert.Equal(t, []string{"ti_claimed", "ti_up_for_retry"}, timeline("c"))
	assert.Equal(t, []string{"b: try 1 started on agent " + strconv.FormatInt(agentID, 10)},
		e.eventMessages(runID, state.EventTIStarted))

	var aStart, aEnd, bStart, cStart, cEvent *time.Time
	require.NoError(t, e.raw.QueryRow(e.ctx, `
		SELECT (SELECT started_at FROM task_instances WHERE id = $1), (SELECT end_date FROM task_instances WHERE id = $1),
		       (SELECT started_at FROM task_instances WHERE id = $2), (SELECT started_at FROM task_instances WHERE id = $3),
		       (SELECT created_at FROM events WHERE ti_id = $3 AND kind = 'ti_up_for_retry')`,
		byTask["a"].TIID, byTask["b"].TIID, byTask["c"].TIID).Scan(&aStart, &aEnd, &bStart, &cStart, &cEvent))
	require.NotNil(t, aStart, "the success recorded the start")
	assert.Equal(t, *aEnd, *aStart, "in the completion's transaction")
	require.NotNil(t, bStart)
	assert.True(t, bStart.Equal(reported), "a reported start is kept: %s, reported %s", bStart, reported)
	require.NotNil(t, cStart, "the failure recorded the start")
	require.NotNil(t, cEvent)
	assert.Equal(t, *cEvent, *cStart, "in the completion's transaction")
}

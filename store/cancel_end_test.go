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

// docs/design.md §4 cancel: a cancel ends the TI and the run at once, and
// the completion the agent sends once it has stopped the attempt's
// process group moves both end times to when that happened. The state
// stays cancelled, a replay moves nothing back, and a completion of
// another attempt is still stale.
func TestCancelledAttemptsCompletionIsItsEndTime(t *testing.T) {
	t.Parallel()
	e := newSchedEnvWith(t, store.TestSignals{})
	ctx, st := e.ctx, e.st
	e.apply("dag_id: c\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	runID := e.trigger("c")
	e.tick()
	agent := storetest.Agent(t, st, store.Registration{Name: "w", Capacity: 1})
	tasks, err := st.Claim(ctx, agent, 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	_, _, err = st.Heartbeat(ctx, agent, []store.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}})
	require.NoError(t, err)
	_, err = st.CancelRun(ctx, runID, state.ReasonCancelled, "cancelled by test")
	require.NoError(t, err)
	// The process takes a minute to die: the cancel's end times are a
	// minute before the completion.
	_, err = e.raw.Exec(ctx, `UPDATE task_instances SET end_date = end_date - interval '1 minute' WHERE run_id = $1`, runID)
	require.NoError(t, err)
	_, err = e.raw.Exec(ctx, `UPDATE runs SET end_date = end_date - interval '1 minute' WHERE id = $1`, runID)
	require.NoError(t, err)
	detail := func() store.RunDetail {
		d, err := st.GetRun(ctx, runID)
		require.NoError(t, err)
		return d
	}
	before := detail()

	code := 143
	done := store.Completion{Attempt: tasks[0].Attempt, Outcome: state.OutcomeFailed, ExitCode: &code}
	res := st.CompleteBatch(ctx, agent, []store.Completion{done})
	require.NoError(t, res[0].Err)
	assert.Equal(t, state.TICancelled, res[0].State)
	after := detail()
	ti := after.TaskInstances[0]
	assert.Equal(t, state.RunCancelled, after.State)
	assert.Equal(t, state.TICancelled, ti.State)
	assert.Equal(t, state.ReasonCancelled, ti.Reason)
	require.NotNil(t, ti.EndDate)
	assert.Greater(t, ti.EndDate.Sub(*before.TaskInstances[0].EndDate), 59*time.Second, "the TI ended when its process did")
	assert.Equal(t, *ti.EndDate, *after.EndDate, "the run ended with its last process")

	// A replay moves nothing back.
	res = st.CompleteBatch(ctx, agent, []store.Completion{done})
	require.NoError(t, res[0].Err)
	assert.False(t, detail().EndDate.Before(*after.EndDate))

	// Another attempt of the TI is still stale.
	other := done
	other.AttemptID = "00000000-0000-0000-0000-000000000001"
	res = st.CompleteBatch(ctx, agent, []store.Completion{other})
	var stale *store.StaleAttemptError
	assert.ErrorAs(t, res[0].Err, &stale)
}

package api_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// End to end through the API: a success that arrives
// after its run ended gets 200 (the agent does not drop a 409), is shown
// on the TI in GET /v1/runs/{id} and in the run's events, and is counted
// as decision late_completion_recorded, once.
func TestLateSuccessAfterRunEndIsRecordedAndCounted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	ctx := context.Background()
	const epoch = 1
	require.NoError(t, h.store.AcquireFence(ctx, epoch, "test"))
	h.applyDAG("dag_id: one\ntasks:\n  - id: a\n    command: [\"true\"]\n    retries: 0\n")
	runID := h.trigger("one")
	drain := func() {
		for {
			res, err := h.store.ScheduleDirty(ctx, epoch, 100)
			require.NoError(t, err)
			if res.Runs == 0 {
				return
			}
		}
	}
	drain()
	agentID := h.register("w", nil, 1)
	tasks := h.claim(agentID, 1, 0)
	require.Len(t, tasks, 1)
	// The agent-lost reaper's verdict, as it writes it, then the tick that
	// ends the run (retries: 0).
	ti := h.run(runID).TaskInstances[0]
	landed, err := h.store.ApplyReap(ctx, epoch, store.Reap{
		TIID: ti.ID, RunID: runID, TaskID: "a", TryNumber: ti.TryNumber, AttemptID: tasks[0].AttemptID, AgentID: ti.AgentID,
		State: state.TIFailed, Reason: state.ReasonAgentLost, Message: "agent silent", EventKind: state.EventAgentLost,
		WhereState: state.TIRunning, WhereStamp: *ti.LastHeartbeatAt, StampColumn: store.StampHeartbeat,
	})
	require.NoError(t, err)
	require.True(t, landed)
	drain()
	require.Equal(t, state.RunFailed, h.run(runID).State)

	for i := 0; i < 2; i++ { // the second is a replay
		var resp protocol.CompleteResponse
		code, e := h.call("POST", fmt.Sprintf("/v1/agents/%d/complete", agentID), agentToken,
			protocol.CompleteRequest{Attempt: tasks[0].Attempt, Outcome: state.OutcomeSuccess}, &resp)
		require.Equal(t, 200, code, "completion %d: %s", i, e.Message)
		assert.Equal(t, "failed", resp.State, "the TI keeps the state its run ended with")
	}
	assert.Equal(t, 1.0, testutil.ToFloat64(h.metrics.Decisions.WithLabelValues(metrics.DecisionLateCompletionRecorded)))
	assert.Zero(t, testutil.ToFloat64(h.metrics.Decisions.WithLabelValues(metrics.DecisionLateCompletion)))

	var d protocol.RunDetail
	code, e := h.call("GET", fmt.Sprintf("/v1/runs/%d", runID), opToken, nil, &d)
	require.Equal(t, 200, code, e.Message)
	assert.Equal(t, "failed", d.State)
	require.Len(t, d.TaskInstances, 1)
	late := d.TaskInstances[0].Late
	require.NotNil(t, late, "runs show carries the late outcome")
	assert.Equal(t, "success", late.Outcome)
	assert.False(t, late.Accepted)
	assert.Equal(t, 1, late.TryNumber)

	var page protocol.EventList
	code, e = h.call("GET", fmt.Sprintf("/v1/runs/%d/events", runID), opToken, nil, &page)
	require.Equal(t, 200, code, e.Message)
	n := 0
	for _, ev := range page.Events {
		if ev.Kind == string(state.EventLateRecorded) {
			n++
			assert.Equal(t, "a", ev.TaskID)
		}
	}
	assert.Equal(t, 1, n)
}

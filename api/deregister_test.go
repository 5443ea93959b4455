package api_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// KiCI scaler-managed agents: deregistration requeues claimed-but-never-
// started TIs at once and fails started ones with agent_lost, without
// waiting out the threshold.
func TestEphemeralDeregistrationHandlesHeldWorkAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(`dag_id: eph
tasks:
  - id: started
    command: ["true"]
  - id: claimed
    command: ["true"]
`)
	agentID := h.register("ephemeral-1", nil, 2)
	runID := h.trigger("eph")
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool {
		tasks = append(tasks, h.claim(agentID, 2-len(tasks), 200*time.Millisecond)...)
		return len(tasks) == 2
	}, 10*time.Second, 10*time.Millisecond)
	var started protocol.ClaimedTask
	for _, task := range tasks {
		if task.TaskID == "started" {
			started = task
		}
	}
	code, _ := h.call("POST", fmt.Sprintf("/v1/agents/%d/heartbeat", agentID), agentToken,
		protocol.HeartbeatRequest{Entries: []protocol.HeartbeatEntry{{Attempt: started.Attempt, Started: true}}}, nil)
	require.Equal(t, 200, code)

	code, e := h.call("POST", fmt.Sprintf("/v1/agents/%d/deregister", agentID), agentToken, struct{}{}, nil)
	require.Equal(t, 204, code, e.Message)

	s := h.ti(runID, "started")
	assert.Equal(t, state.TIFailed, s.State)
	assert.Equal(t, state.ReasonAgentLost, s.Reason)
	assert.Contains(t, s.Message, "deregistered (it stopped)")
	c := h.ti(runID, "claimed")
	assert.NotEqual(t, state.TIRunning, c.State, "requeued at once")
	assert.Equal(t, 1, c.DispatchAttempts)
	assert.Equal(t, 0, c.TryNumber, "no try spent")

	// The requeued TI runs on another agent.
	other := h.register("other", nil, 1)
	require.Eventually(t, func() bool { return len(h.claim(other, 1, 200*time.Millisecond)) == 1 }, 10*time.Second, 10*time.Millisecond)

	// A deregistered agent is gone: it must register again to do anything.
	code, _ = h.call("POST", fmt.Sprintf("/v1/agents/%d/heartbeat", agentID), agentToken, protocol.HeartbeatRequest{}, nil)
	assert.Equal(t, 404, code)
}

// KiCI in-flight reporting: on reconnect the agent re-registers with the
// attempts it still runs; the server keeps the current ones (refreshing
// their heartbeat) and tells it to kill the rest.
func TestReconnectingAgentKeepsItsCurrentAttempts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(`dag_id: recon
tasks:
  - id: kept
    command: ["true"]
  - id: cancelled
    command: ["true"]
`)
	agentID := h.register("roamer", nil, 2)
	runID := h.trigger("recon")
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool {
		tasks = append(tasks, h.claim(agentID, 2-len(tasks), 200*time.Millisecond)...)
		return len(tasks) == 2
	}, 10*time.Second, 10*time.Millisecond)
	byTask := map[string]protocol.ClaimedTask{}
	for _, task := range tasks {
		byTask[task.TaskID] = task
	}
	// While the agent was away, its first run was cancelled; it also
	// claimed a TI of a second run, which is still current.
	_, err := h.store.CancelRun(t.Context(), runID, "cancelled", "test")
	require.NoError(t, err)
	h.applyDAG("dag_id: recon2\ntasks:\n  - id: kept2\n    command: [\"true\"]\n")
	run2 := h.trigger("recon2")
	var kept protocol.ClaimedTask
	require.Eventually(t, func() bool {
		got := h.claim(agentID, 1, 200*time.Millisecond)
		if len(got) == 1 {
			kept = got[0]
		}
		return len(got) == 1
	}, 10*time.Second, 10*time.Millisecond)
	before := h.ti(run2, "kept2").LastHeartbeatAt

	var resp protocol.RegisterResponse
	unknown := protocol.Attempt{TIID: 999999, AttemptID: "7b0a3c1e-9f0e-4c43-8f5e-9a0d3c6b1e2f"}
	// The reconnecting agent proves it is the same one with its credential.
	code, e := h.callCred("POST", "/v1/agents/register", agentToken, h.credential(agentID), protocol.RegisterRequest{
		Name: "roamer", Capacity: 2,
		InFlight: []protocol.HeartbeatEntry{{Attempt: kept.Attempt, Started: true}, {Attempt: byTask["kept"].Attempt},
			{Attempt: byTask["cancelled"].Attempt}, {Attempt: unknown}},
	}, &resp)
	require.Equal(t, 200, code, e.Message)
	assert.Equal(t, agentID, resp.AgentID, "same name, same agent id")
	assert.Equal(t, h.credential(agentID), resp.Credential, "a reconnect keeps the credential")
	reasons := map[int64]state.StopReason{}
	for _, s := range resp.Terminate {
		reasons[s.TIID] = s.Reason
	}
	assert.Equal(t, map[int64]state.StopReason{
		byTask["kept"].TIID:      state.StopCancelled,
		byTask["cancelled"].TIID: state.StopCancelled,
		unknown.TIID:             state.StopUnknown,
	}, reasons, "only the attempts that are no longer current are terminated")
	ti := h.ti(run2, "kept2")
	assert.Equal(t, state.TIRunning, ti.State, "the current attempt is kept")
	assert.NotNil(t, ti.StartedAt, "an in-flight report with started records the start")
	assert.NotEqual(t, before, ti.LastHeartbeatAt)
}

// The first heartbeat that reports a process started records started_at
// and a ti_started event, once.
func TestStartedHeartbeatRecordsOneEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(wideDAG("start", 1, ""))
	agentID := h.register("w", nil, 1)
	runID := h.trigger("start")
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool { tasks = h.claim(agentID, 1, 200*time.Millisecond); return len(tasks) == 1 }, 10*time.Second, 10*time.Millisecond)
	for i := 0; i < 3; i++ {
		code, _ := h.call("POST", fmt.Sprintf("/v1/agents/%d/heartbeat", agentID), agentToken,
			protocol.HeartbeatRequest{Entries: []protocol.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}}}, nil)
		require.Equal(t, 200, code)
	}
	evs, err := h.store.RunEvents(t.Context(), runID, 0)
	require.NoError(t, err)
	started := 0
	for _, e := range evs {
		if e.Kind == "ti_started" {
			started++
			assert.Equal(t, tasks[0].AttemptID, e.AttemptID)
		}
	}
	assert.Equal(t, 1, started)
	assert.NotNil(t, h.ti(runID, "t000").StartedAt)
}

package api_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
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
	assert.Equal(t, "failed", s.State)
	assert.Equal(t, "agent_lost", s.Reason)
	assert.Contains(t, s.Message, "ephemeral agent")
	c := h.ti(runID, "claimed")
	assert.NotEqual(t, "running", c.State, "requeued at once")
	assert.Equal(t, 1, c.DispatchAttempts)
	assert.Equal(t, 0, c.TryNumber, "no try spent")

	// The requeued TI runs on another agent.
	other := h.register("other", nil, 1)
	require.Eventually(t, func() bool { return len(h.claim(other, 1, 200*time.Millisecond)) == 1 }, 10*time.Second, 10*time.Millisecond)

	// A deregistered agent is gone: it must register again to do anything.
	code, _ = h.call("POST", fmt.Sprintf("/v1/agents/%d/heartbeat", agentID), agentToken, protocol.HeartbeatRequest{}, nil)
	assert.Equal(t, 404, code)
}

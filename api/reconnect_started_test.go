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

// A re-registration reports each in-flight attempt with
// its true started flag, and the server records exactly that. An attempt
// claimed before the link dropped whose process never started stays
// unstarted, so losing its agent requeues it without spending a try,
// instead of failing it agent_lost as if it had run. (On main every
// in-flight attempt was recorded as started.)
func TestReconnectKeepsNeverStartedAttemptsUnstarted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(`dag_id: recon7
tasks:
  - id: ran
    retries: 0
    command: ["true"]
  - id: waiting
    retries: 0
    command: ["true"]
`)
	agentID := h.register("reconnector", nil, 2)
	runID := h.trigger("recon7")
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool {
		tasks = append(tasks, h.claim(agentID, 2-len(tasks), 200*time.Millisecond)...)
		return len(tasks) == 2
	}, 10*time.Second, 10*time.Millisecond)
	byTask := map[string]protocol.ClaimedTask{}
	for _, task := range tasks {
		byTask[task.TaskID] = task
	}

	// The link drops before any heartbeat; "ran" starts during the
	// outage, "waiting" does not. The agent reconnects with both.
	code, e := h.callCred("POST", "/v1/agents/register", agentToken, h.credential(agentID), protocol.RegisterRequest{
		Name: "reconnector", Capacity: 2,
		InFlight: []protocol.HeartbeatEntry{
			{Attempt: byTask["ran"].Attempt, Started: true},
			{Attempt: byTask["waiting"].Attempt, Started: false},
		},
	}, nil)
	require.Equal(t, 200, code, e.Message)
	ran, waiting := h.ti(runID, "ran"), h.ti(runID, "waiting")
	assert.NotNil(t, ran.StartedAt, "a started in-flight attempt records its start")
	assert.Nil(t, waiting.StartedAt, "a never-started in-flight attempt stays unstarted")
	evs, err := h.store.RunEvents(t.Context(), runID, 0)
	require.NoError(t, err)
	for _, ev := range evs {
		if ev.Kind == "ti_started" {
			assert.Equal(t, ran.ID, *ev.TIID, "only the started attempt has a ti_started event")
		}
	}

	// The agent is gone for good: its started attempt fails agent_lost,
	// the never-started one is requeued with its try unspent.
	code, e = h.call("POST", fmt.Sprintf("/v1/agents/%d/deregister", agentID), agentToken, struct{}{}, nil)
	require.Equal(t, 204, code, e.Message)
	ran, waiting = h.ti(runID, "ran"), h.ti(runID, "waiting")
	assert.Equal(t, state.TIFailed, ran.State)
	assert.Equal(t, state.ReasonAgentLost, ran.Reason)
	assert.NotEqual(t, state.TIFailed, waiting.State, "the never-started attempt did not spend its only try")
	assert.Equal(t, 0, waiting.TryNumber, "no try spent")
	assert.Equal(t, 1, waiting.DispatchAttempts, "counted as a dispatch attempt instead")
}

package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/outputs"
	"github.com/vigil-sched/vigil/state"
)

// claimAll claims until want tasks are held, by task id.
func (h *harness) claimAll(agentID int64, want int) map[string]protocol.ClaimedTask {
	h.t.Helper()
	got := map[string]protocol.ClaimedTask{}
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < want {
		require.True(h.t, time.Now().Before(deadline), "claimed %d of %d tasks: %v", len(got), want, got)
		for _, c := range h.claim(agentID, want-len(got), 2*time.Second) {
			got[c.TaskID] = c
		}
	}
	return got
}

// TestServerEnforcesTheOutputLimit: the server does not trust an agent
// to keep the outputs rules. A success whose outputs are over 64 KiB
// fails output_too_large with the size and the limit in its message, on
// the batch route and the single one, and stores nothing; a key that
// breaks the rule, or outputs with a failure, is a 400 naming the item.
// Outputs within the limit reach the direct downstream's claim as
// VIGIL_INPUT_* variables.
func TestServerEnforcesTheOutputLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG("dag_id: out\ntasks:\n" +
		"  - {id: big, command: [\"true\"]}\n  - {id: big1, command: [\"true\"]}\n  - {id: load-db, command: [\"true\"]}\n" +
		"  - {id: after, command: [\"true\"], depends_on: [load-db]}\n")
	runID := h.trigger("out")
	agentID := h.register("w", nil, 10)
	got := h.claimAll(agentID, 3)
	zero := 0
	over := map[string]string{"k": strings.Repeat("v", outputs.MaxBytes)} // one byte over

	path := fmt.Sprintf("/v1/agents/%d/completions", agentID)
	code, e := h.call("POST", path, agentToken, protocol.CompleteBatchRequest{Completions: []protocol.CompleteRequest{
		{Attempt: got["load-db"].Attempt, Outcome: state.OutcomeSuccess, ExitCode: &zero, Outputs: map[string]string{"bad key": "1"}}}}, nil)
	assert.Equal(t, 400, code)
	assert.Contains(t, e.Message, `completions[0].outputs: output key "bad key": must be a letter or '_'`)
	code, e = h.call("POST", path, agentToken, protocol.CompleteBatchRequest{Completions: []protocol.CompleteRequest{
		{Attempt: got["load-db"].Attempt, Outcome: state.OutcomeFailed, ExitCode: &zero, Outputs: map[string]string{"k": "1"}}}}, nil)
	assert.Equal(t, 400, code)
	assert.Contains(t, e.Message, `completions[0].outputs: allowed only with outcome "success", got outcome "failed"`)

	var resp protocol.CompleteBatchResponse
	code, e = h.call("POST", path, agentToken, protocol.CompleteBatchRequest{Completions: []protocol.CompleteRequest{
		{Attempt: got["big"].Attempt, Outcome: state.OutcomeSuccess, ExitCode: &zero, Outputs: over},
		{Attempt: got["load-db"].Attempt, Outcome: state.OutcomeSuccess, ExitCode: &zero, Outputs: map[string]string{"row_count": "12"}},
	}}, &resp)
	require.Equal(t, 200, code, e.Message)
	require.Len(t, resp.Results, 2)
	assert.Equal(t, string(state.TIFailed), resp.Results[0].State)
	assert.Equal(t, string(state.TISuccess), resp.Results[1].State)
	code, e = h.call("POST", fmt.Sprintf("/v1/agents/%d/complete", agentID), agentToken,
		protocol.CompleteRequest{Attempt: got["big1"].Attempt, Outcome: state.OutcomeSuccess, ExitCode: &zero, Outputs: over}, nil)
	require.Equal(t, 200, code, e.Message)
	for _, id := range []string{"big", "big1"} {
		ti := h.ti(runID, id)
		assert.Equal(t, state.TIFailed, ti.State, id)
		assert.Equal(t, state.ReasonOutputTooLarge, ti.Reason, id)
		assert.Contains(t, ti.Message, "outputs are 65537 bytes of keys and values, over the limit of 65536 bytes per task instance", id)
	}
	outs, _, err := h.store.RunOutputs(t.Context(), runID, "", -1)
	require.NoError(t, err)
	require.Len(t, outs, 1, "only load-db's outputs are stored")
	assert.Equal(t, map[string]string{"row_count": "12"}, outs[0].Outputs)

	after := h.claimAll(agentID, 1)["after"]
	assert.Equal(t, map[string]string{"VIGIL_INPUT_LOAD_DB_ROW_COUNT": "12"}, after.Inputs)
}

// TestInputsThatCannotBeDeliveredFailTheClaim: two upstream outputs that
// are one VIGIL_INPUT_ variable fail the downstream's try start_failed,
// naming both, instead of handing it one of them.
func TestInputsThatCannotBeDeliveredFailTheClaim(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG("dag_id: clash\ntasks:\n  - {id: a, command: [\"true\"]}\n  - {id: a_b, command: [\"true\"]}\n" +
		"  - {id: z, command: [\"true\"], depends_on: [a, a_b]}\n")
	runID := h.trigger("clash")
	agentID := h.register("w", nil, 10)
	got := h.claimAll(agentID, 2)
	zero := 0
	for id, out := range map[string]map[string]string{"a": {"b_c": "1"}, "a_b": {"c": "2"}} {
		code, e := h.call("POST", fmt.Sprintf("/v1/agents/%d/complete", agentID), agentToken,
			protocol.CompleteRequest{Attempt: got[id].Attempt, Outcome: state.OutcomeSuccess, ExitCode: &zero, Outputs: out}, nil)
		require.Equal(t, 200, code, e.Message)
	}
	ti := h.waitTI(runID, "z", state.TIQueued, 20*time.Second)
	assert.Empty(t, h.claim(agentID, 1, time.Second), "z is failed, not handed out")
	ti = h.ti(runID, "z")
	assert.Equal(t, state.TIFailed, ti.State)
	assert.Equal(t, state.ReasonStartFailed, ti.Reason)
	assert.Contains(t, ti.Message, "VIGIL_INPUT_A_B_C would carry both output b_c of task a and output c of task a_b; rename one of the keys")
}

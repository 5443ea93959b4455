package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// Agent identity: every endpoint that acts for an agent checks
// that the credential is that agent's own. The agent token alone, or
// another agent's credential, gets 403 agent_credential for each of
// claim, heartbeat, complete, completions (the batch route agents use),
// logs and deregister, and changes nothing.
func TestAgentCannotActAsAnotherAgent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(wideDAG("ident", 1, ""))
	owner := h.register("owner", nil, 1)
	thief := h.register("thief", nil, 1)
	runID := h.trigger("ident")
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool { tasks = h.claim(owner, 1, time.Second); return len(tasks) == 1 }, 10*time.Second, 10*time.Millisecond)
	task := tasks[0]
	exit := 0
	bodies := map[string]any{
		"claim":     protocol.ClaimRequest{Slots: 1},
		"heartbeat": protocol.HeartbeatRequest{Entries: []protocol.HeartbeatEntry{{Attempt: task.Attempt, Started: true}}},
		"complete":  protocol.CompleteRequest{Attempt: task.Attempt, Outcome: state.OutcomeSuccess, ExitCode: &exit},
		"completions": protocol.CompleteBatchRequest{Completions: []protocol.CompleteRequest{
			{Attempt: task.Attempt, Outcome: state.OutcomeSuccess, ExitCode: &exit}}},
		"logs":       protocol.LogsRequest{Lines: []protocol.LogLine{{Attempt: task.Attempt, Seq: 1, Stream: "stdout", Time: time.Now(), Line: "forged"}}},
		"deregister": struct{}{},
	}
	creds := []struct{ name, cred string }{
		{"another agent's credential", h.credential(thief)},
		{"the agent token alone", ""},
		{"a made-up credential", "0000"},
	}
	for _, action := range []string{"claim", "heartbeat", "complete", "completions", "logs", "deregister"} {
		for _, c := range creds {
			code, e := h.callCred("POST", fmt.Sprintf("/v1/agents/%d/%s", owner, action), agentToken, c.cred, bodies[action], nil)
			assert.Equal(t, 403, code, "%s as agent %d with %s", action, owner, c.name)
			assert.Equal(t, protocol.CodeAgentCredential, e.Code, "%s with %s", action, c.name)
			assert.Contains(t, e.Message, protocol.HeaderAgentCredential, "%s with %s: the message names the header", action, c.name)
		}
	}
	ti := h.ti(runID, "t000")
	assert.Equal(t, state.TIRunning, ti.State, "the owner's attempt is untouched")
	assert.Nil(t, ti.StartedAt, "no forged heartbeat recorded a start")
	logs, err := h.store.ReadLogs(t.Context(), runID, "t000", 0, store.LogCursor{}, 100)
	require.NoError(t, err)
	assert.Empty(t, logs.Lines, "no forged log line was stored")

	// The owner itself still can do all of it.
	var hb protocol.HeartbeatResponse
	code, e := h.call("POST", fmt.Sprintf("/v1/agents/%d/heartbeat", owner), agentToken, bodies["heartbeat"], &hb)
	require.Equal(t, 200, code, e.Message)
	assert.Empty(t, hb.Stop)
	code, e = h.call("POST", fmt.Sprintf("/v1/agents/%d/complete", owner), agentToken, bodies["complete"], nil)
	require.Equal(t, 200, code, e.Message)

	// Only the agent itself or an operator may deregister it.
	code, e = h.call("POST", fmt.Sprintf("/v1/agents/%d/deregister", thief), opToken, struct{}{}, nil)
	assert.Equal(t, 204, code, "an operator may deregister any agent: %s", e.Message)
	code, e = h.call("POST", fmt.Sprintf("/v1/agents/%d/deregister", owner), agentToken, struct{}{}, nil)
	assert.Equal(t, 204, code, "an agent may deregister itself: %s", e.Message)
	// An unknown agent is 404, whoever asks, so a pruned agent registers again.
	code, e = h.callCred("POST", "/v1/agents/999999/heartbeat", agentToken, h.credential(owner), protocol.HeartbeatRequest{}, nil)
	assert.Equal(t, 404, code, e.Message)
}

// Agent identity: a name belongs to one live registration. A
// second registration without its credential gets 409 name_in_use while
// the holder heartbeats; the holder's own reconnect (with its credential)
// keeps id and credential; once the holder is silent for the agent-lost
// threshold, or deregistered, a new process takes the name over with a
// new credential, and the old one is refused.
func TestDuplicateLiveAgentNameIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	first := h.register("dup", nil, 1)
	firstCred := h.credential(first)
	other := h.register("other", nil, 1)

	for _, c := range []struct{ name, cred string }{
		{"no credential", ""},
		{"another agent's credential", h.credential(other)},
	} {
		var resp protocol.RegisterResponse
		code, e := h.callCred("POST", "/v1/agents/register", agentToken, c.cred,
			protocol.RegisterRequest{Name: "dup", Capacity: 1}, &resp)
		assert.Equal(t, 409, code, c.name)
		assert.Equal(t, protocol.CodeNameInUse, e.Code, c.name)
		assert.Contains(t, e.Message, `agent name "dup" is held by live agent`, c.name)
		assert.Contains(t, e.Message, "agent-lost threshold 1m30s", c.name)
	}
	code, _ := h.call("POST", fmt.Sprintf("/v1/agents/%d/heartbeat", first), agentToken, protocol.HeartbeatRequest{}, nil)
	assert.Equal(t, 200, code, "the refused registrations left the holder alone")

	// The holder reconnecting (same process, credential in memory).
	var again protocol.RegisterResponse
	code, e := h.callCred("POST", "/v1/agents/register", agentToken, firstCred,
		protocol.RegisterRequest{Name: "dup", Capacity: 1}, &again)
	require.Equal(t, 200, code, e.Message)
	assert.Equal(t, first, again.AgentID)
	assert.Equal(t, firstCred, again.Credential)

	// The holder falls silent past the 90 s agent-lost threshold: a
	// restarted process may take the name (the same id, a new credential).
	db, err := pgx.Connect(context.Background(), h.dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	_, err = db.Exec(t.Context(), `UPDATE agents SET last_heartbeat_at = now() - interval '91 seconds' WHERE id = $1`, first)
	require.NoError(t, err)
	var taken protocol.RegisterResponse
	code, e = h.callCred("POST", "/v1/agents/register", agentToken, "",
		protocol.RegisterRequest{Name: "dup", Capacity: 1}, &taken)
	require.Equal(t, 200, code, e.Message)
	assert.Equal(t, first, taken.AgentID, "a restarted agent keeps its id")
	assert.NotEqual(t, firstCred, taken.Credential, "a takeover mints a new credential")
	code, e = h.callCred("POST", fmt.Sprintf("/v1/agents/%d/heartbeat", first), agentToken, firstCred, protocol.HeartbeatRequest{}, nil)
	assert.Equal(t, 403, code, "the silent process's credential is void")
	assert.Equal(t, protocol.CodeAgentCredential, e.Code)
	code, e = h.callCred("POST", "/v1/agents/register", agentToken, firstCred, protocol.RegisterRequest{Name: "dup", Capacity: 1}, nil)
	assert.Equal(t, 409, code, "and it cannot take the name back while the new holder lives")
	assert.Equal(t, protocol.CodeNameInUse, e.Code)

	// A deregistered name is free at once.
	code, e = h.callCred("POST", fmt.Sprintf("/v1/agents/%d/deregister", first), agentToken, taken.Credential, struct{}{}, nil)
	require.Equal(t, 204, code, e.Message)
	code, e = h.callCred("POST", "/v1/agents/register", agentToken, "", protocol.RegisterRequest{Name: "dup", Capacity: 1}, nil)
	assert.Equal(t, 200, code, e.Message)
}

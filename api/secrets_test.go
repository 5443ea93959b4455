package api_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

const secretDAG = "dag_id: sec\ntasks:\n  - id: use\n    command: [\"true\"]\n    env:\n      DB_PASSWORD: {secret: db_password}\n      HOST: db\n"

// rawGet returns the body of a GET with token, whatever its status.
func (h *harness) rawGet(path, token string) string {
	h.t.Helper()
	req, err := http.NewRequest("GET", h.srv.URL+path, nil)
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return string(b)
}

// TestSecretsReachOnlyTheClaimingAgent: the value set over the API comes
// back only in the claim reply of the agent that claimed the task;
// GET /v1/dags/{id}, the secrets list and the run show the reference,
// name and version only.
func TestSecretsReachOnlyTheClaimingAgent(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	const value = "s3cr3t-value-42"
	var set protocol.SetSecretResponse
	code, e := h.call("PUT", "/v1/secrets/db_password", opToken, protocol.SetSecretRequest{Value: value}, &set)
	require.Equal(t, 200, code, e.Message)
	assert.True(t, set.Created)

	code, e = h.call("POST", "/v1/dags", opToken, protocol.ApplyDAGRequest{YAML: secretDAG}, nil)
	require.Equal(t, 200, code, e.Message)
	run := h.trigger("sec")
	other := h.register("idle", []string{"gpu"}, 1)
	agent := h.register("w", nil, 1)
	tasks := h.claim(agent, 1, 5*time.Second)
	require.Len(t, tasks, 1)
	assert.Equal(t, map[string]string{"HOST": "db"}, tasks[0].Env)
	assert.Equal(t, map[string]string{"DB_PASSWORD": value}, tasks[0].Secrets)
	assert.Empty(t, h.claim(other, 1, 100*time.Millisecond))

	for _, path := range []string{"/v1/dags/sec", "/v1/dags", "/v1/secrets", fmt.Sprintf("/v1/runs/%d", run),
		fmt.Sprintf("/v1/runs/%d/events", run), "/v1/runs", "/v1/agents"} {
		body := h.rawGet(path, opToken)
		assert.NotContains(t, body, value, path)
	}
	assert.Contains(t, h.rawGet("/v1/dags/sec", opToken), `"DB_PASSWORD":{"secret":"db_password"}`)
	var list protocol.SecretList
	code, _ = h.call("GET", "/v1/secrets", opToken, nil, &list)
	require.Equal(t, 200, code)
	require.Len(t, list.Secrets, 1)
	assert.Equal(t, int64(1), list.Secrets[0].Version)
}

// TestSecretsRoutesRefuse: roles, names and values are checked, an apply
// naming a missing secret is refused naming DAG, task, variable and
// secret, and a secret deleted after the apply fails the claimed TI with
// reason secret_missing instead of handing it out.
func TestSecretsRoutesRefuse(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, c := range []struct {
		method, path, token string
		body                any
		code                int
		msg                 string
	}{
		{"GET", "/v1/secrets", viewerToken, nil, 403, "admin role"},
		{"PUT", "/v1/secrets/x_1", viewerToken, protocol.SetSecretRequest{Value: "abcd"}, 403, "admin role"},
		{"DELETE", "/v1/secrets/x_1", agentToken, nil, 403, "admin role"},
		{"PUT", "/v1/secrets/1x", opToken, protocol.SetSecretRequest{Value: "abcd"}, 400, "path parameter name: \"1x\" must be 1 to 128 characters"},
		{"PUT", "/v1/secrets/x_1", opToken, protocol.SetSecretRequest{Value: "abc"}, 400, "value: must be at least 4 bytes (got 3)"},
		{"PUT", "/v1/secrets/x_1", opToken, protocol.SetSecretRequest{Value: strings.Repeat("v", 64<<10+1)}, 400, "value: must be at most 65536 bytes"},
		{"DELETE", "/v1/secrets/x_1", opToken, nil, 404, "secret x_1"},
	} {
		code, e := h.call(c.method, c.path, c.token, c.body, nil)
		assert.Equal(t, c.code, code, "%s %s", c.method, c.path)
		assert.Contains(t, e.Message, c.msg, "%s %s", c.method, c.path)
	}

	code, e := h.call("POST", "/v1/dags", opToken, protocol.ApplyDAGRequest{YAML: secretDAG}, nil)
	require.Equal(t, 400, code)
	assert.Equal(t, `dag "sec": task "use": env DB_PASSWORD: secret "db_password": no such secret (create it with `+"`vigil secrets set db_password`)", e.Message)

	code, e = h.call("PUT", "/v1/secrets/db_password", opToken, protocol.SetSecretRequest{Value: "first"}, nil)
	require.Equal(t, 200, code, e.Message)
	code, e = h.call("POST", "/v1/dags", opToken, protocol.ApplyDAGRequest{YAML: secretDAG}, nil)
	require.Equal(t, 200, code, e.Message)
	code, e = h.call("DELETE", "/v1/secrets/db_password", opToken, nil, nil)
	require.Equal(t, 204, code, e.Message)

	run := h.trigger("sec")
	agent := h.register("w", nil, 1)
	deadline := time.Now().Add(10 * time.Second)
	for h.ti(run, "use").State != state.TIQueued && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	assert.Empty(t, h.claim(agent, 1, 5*time.Second), "a task whose secret is gone is not handed out")
	ti := h.waitTI(run, "use", state.TIFailed, 10*time.Second)
	assert.Equal(t, state.ReasonSecretMissing, ti.Reason)
	assert.Contains(t, h.rawGet(fmt.Sprintf("/v1/runs/%d/events", run), opToken),
		`try 1 could not start: env DB_PASSWORD: secret \"db_password\" does not exist`)
}

// TestSecretsOffWithoutAKey: a server without a key refuses the secrets
// routes with secrets_disabled and a DAG that names a secret at apply.
func TestSecretsOffWithoutAKey(t *testing.T) {
	h := newHarness(t, harnessOpts{noSecrets: true})
	code, e := h.call("GET", "/v1/secrets", opToken, nil, nil)
	assert.Equal(t, 503, code)
	assert.Equal(t, protocol.CodeSecretsDisabled, e.Code)
	assert.Contains(t, e.Message, "--secrets-key-file")
	code, e = h.call("POST", "/v1/dags", opToken, protocol.ApplyDAGRequest{YAML: secretDAG}, nil)
	assert.Equal(t, 400, code)
	assert.Contains(t, e.Message, `dag "sec": task "use": env DB_PASSWORD: secret "db_password": secrets are not configured on this server`)
}

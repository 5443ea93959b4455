package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// register registers an agent named name with tags and returns its reply.
func register(t *testing.T, lite *liteProc, token, name string, tags ...string) (int, []byte, protocol.RegisterResponse) {
	t.Helper()
	code, body := agentCall(t, lite, token, "", "/v1/agents/register", protocol.RegisterRequest{Name: name, Tags: tags, Capacity: 1})
	var reg protocol.RegisterResponse
	if code == http.StatusOK {
		require.NoError(t, json.Unmarshal(body, &reg))
	}
	return code, body, reg
}

// claim claims one slot for reg with a short long poll.
func claim(t *testing.T, lite *liteProc, token string, reg protocol.RegisterResponse) (int, []byte, []protocol.ClaimedTask) {
	t.Helper()
	code, body := agentCall(t, lite, token, reg.Credential, fmt.Sprintf("/v1/agents/%d/claim", reg.AgentID),
		protocol.ClaimRequest{Slots: 1, Wait: protocol.Duration(time.Second)})
	var out protocol.ClaimResponse
	if code == http.StatusOK {
		require.NoError(t, json.Unmarshal(body, &out))
	}
	return code, body, out.Tasks
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestAgentTokenScopedToTags runs Lite with --agent-tokens-file: a token
// scoped to [cpu] cannot register gpu (403 naming the tag), and its agent
// registered with cpu claims the cpu task and never the queued gpu one.
// A token that allowed gpu and is rewritten to [cpu] (SIGHUP) can no
// longer claim for its gpu agent (403); a reread of a broken file keeps
// the previous tokens and logs why.
func TestAgentTokenScopedToTags(t *testing.T) {
	t.Parallel()
	cpuTok, mixedTok := "cpu-token-"+randomHex(12), "mixed-token-"+randomHex(12)
	tokens := filepath.Join(t.TempDir(), "agent-tokens.yaml")
	writeTokens := func(mixedTags string) {
		require.NoError(t, os.WriteFile(tokens, []byte(fmt.Sprintf(
			"- name: cpu-pool\n  token_sha256: %s\n  tags: [cpu]\n- name: mixed\n  token_sha256: %s\n  tags: [%s]\n",
			sha256Hex(cpuTok), sha256Hex(mixedTok), mixedTags)), 0o600))
	}
	writeTokens("cpu, gpu")
	dags := t.TempDir()
	writeDAG(t, dags, "tagged", `
dag_id: tagged
tasks:
  - id: train
    tags: [gpu]
    command: ["true"]
  - id: crunch
    tags: [cpu]
    command: ["true"]
`)
	lite := startLite(t, liteOpts{DAGs: dags, Extra: []string{"--agent-tokens-file", tokens}})

	code, body, _ := register(t, lite, cpuTok, "sneaky", "cpu", "gpu")
	require.Equal(t, http.StatusForbidden, code, "%s", body)
	assert.Contains(t, string(body), `tag \"gpu\" is not among the tags of agent token \"cpu-pool\" (cpu)`)
	code, body, _ = register(t, lite, "not-a-token-at-all", "nobody", "cpu")
	require.Equal(t, http.StatusUnauthorized, code, "%s", body)

	code, body, cpuAgent := register(t, lite, cpuTok, "cpu-box", "cpu")
	require.Equal(t, http.StatusOK, code, "%s", body)
	_, code = triggerJSON(t, lite, "tagged", false)
	require.Equal(t, 0, code)
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for len(got) == 0 && time.Now().Before(deadline) {
		code, body, tasks := claim(t, lite, cpuTok, cpuAgent)
		require.Equal(t, http.StatusOK, code, "%s", body)
		for _, task := range tasks {
			got = append(got, task.TaskID)
		}
	}
	assert.Equal(t, []string{"crunch"}, got, "the cpu agent claims the cpu task")
	for range 2 {
		code, body, tasks := claim(t, lite, cpuTok, cpuAgent)
		require.Equal(t, http.StatusOK, code, "%s", body)
		assert.Empty(t, tasks, "the gpu task stays queued for the cpu-scoped token")
	}

	code, body, gpuAgent := register(t, lite, mixedTok, "gpu-box", "gpu")
	require.Equal(t, http.StatusOK, code, "%s", body)
	writeTokens("cpu")
	require.NoError(t, syscall.Kill(lite.Pid(), syscall.SIGHUP))
	require.Eventually(t, func() bool {
		code, _, _ := claim(t, lite, mixedTok, gpuAgent)
		return code == http.StatusForbidden
	}, 15*time.Second, 100*time.Millisecond, "after the reread the mixed token may not claim for its gpu agent")
	code, body, _ = claim(t, lite, mixedTok, gpuAgent)
	assert.Contains(t, string(body), `tag \"gpu\" is not among the tags of agent token \"mixed\" (cpu)`)

	require.NoError(t, os.WriteFile(tokens, []byte("- name: broken\n  token_sha256: abc\n  tags: [cpu]\n"), 0o600))
	require.NoError(t, syscall.Kill(lite.Pid(), syscall.SIGHUP))
	require.Eventually(t, func() bool {
		for _, l := range jsonLogLines(lite.LogPath()) {
			if e, _ := l["err"].(string); strings.Contains(e, `entry 1 ("broken"): token_sha256: must be 64 hex digits`) {
				return true
			}
		}
		return false
	}, 15*time.Second, 100*time.Millisecond, "the failed reread is logged naming the file, entry and field")
	code, body, _ = register(t, lite, cpuTok, "cpu-box-2", "cpu")
	assert.Equal(t, http.StatusOK, code, "the previous tokens stay in effect: %s", body)
}

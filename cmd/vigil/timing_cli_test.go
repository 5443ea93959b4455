package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failoverArithmetic is the error for TTL 3s, heartbeat 1s and the given
// agent-lost threshold, named as source (the flag, variable or file key
// the value came from).
func failoverArithmetic(source, agentLost string) string {
	return source + ": " + agentLost +
		" must exceed the election TTL 3s + agent failover bound 2×1s + heartbeat interval 1s = 6s"
}

// TestServerRefusesReapingAcrossFailover: `vigil server`
// refuses, with exit 2 and the arithmetic, an agent-lost threshold under
// which a healthy agent on a frozen replica is reaped before it fails over,
// whether the values come from flags, the environment or the config file.
// (TTL 3s, heartbeat 1s, agent-lost 4s is the combination from the field.)
func TestServerRefusesReapingAcrossFailover(t *testing.T) {
	clearClientEnv(t)
	for _, k := range []string{"VIGIL_AGENT_LOST_THRESHOLD", "VIGIL_ELECTION_TTL", "VIGIL_HEARTBEAT_INTERVAL"} {
		t.Setenv(k, "")
		require.NoError(t, os.Unsetenv(k))
	}
	base := []string{"server", "--database-url", "postgres://127.0.0.1:1/none", "--etcd-endpoints", "127.0.0.1:1",
		"--agent-token", "agent-token-0123456789", "--operator-token", "operator-token-0123456789"}

	r := runCLI(t, append(base, "--election-ttl", "3s", "--heartbeat-interval", "1s", "--agent-lost-threshold", "4s")...)
	assert.Equal(t, exitUsage, r.code)
	require.Error(t, r.err)
	assert.Contains(t, r.err.Error(), failoverArithmetic("--agent-lost-threshold", "4s"))

	t.Setenv("VIGIL_AGENT_LOST_THRESHOLD", "6s")
	r = runCLI(t, append(base, "--election-ttl", "3s", "--heartbeat-interval", "1s")...)
	assert.Equal(t, exitUsage, r.code)
	require.Error(t, r.err)
	assert.Contains(t, r.err.Error(), failoverArithmetic("--agent-lost-threshold (from VIGIL_AGENT_LOST_THRESHOLD)", "6s"))
	require.NoError(t, os.Unsetenv("VIGIL_AGENT_LOST_THRESHOLD"))

	cfg := filepath.Join(t.TempDir(), "vigil.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(`election-ttl: 3s
heartbeat-interval: 1s
recovery:
  agent-lost-threshold: 5s
`), 0o600))
	r = runCLI(t, append(base, "--config", cfg)...)
	assert.Equal(t, exitUsage, r.code)
	require.Error(t, r.err)
	assert.Contains(t, r.err.Error(), failoverArithmetic("--agent-lost-threshold (from config file key recovery.agent-lost-threshold)", "5s"))
}

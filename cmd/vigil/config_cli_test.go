package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Config and env errors name their source with no parser text.
// Lite is pointed at a database that does not exist: every
// case must fail on its configuration first.

func liteBase(t *testing.T) []string {
	t.Helper()
	clearClientEnv(t)
	for _, k := range []string{"VIGIL_AGENTS", "VIGIL_HEARTBEAT_INTERVAL", "VIGIL_AGENT_LOST_THRESHOLD", "VIGIL_DATABASE_WAIT"} {
		t.Setenv(k, "")
		require.NoError(t, os.Unsetenv(k))
	}
	return []string{"lite", "--database-url", "postgres://127.0.0.1:1/none", "--data-dir", t.TempDir(), "--log-format", "json"}
}

func TestBadValueNamesSourceWithoutParserText(t *testing.T) {
	base := liteBase(t)
	cfg := filepath.Join(t.TempDir(), "vigil.yaml")
	for _, c := range []struct {
		name string
		env  map[string]string
		file string
		args []string
		want string
	}{
		{name: "flag int", args: []string{"--agents", "many"}, want: `--agents: "many" must be a whole number`},
		{name: "flag duration", args: []string{"--heartbeat-interval", "15"}, want: `--heartbeat-interval: "15" must be a duration such as 90s, 5m or 1h30m (a unit is required)`},
		{name: "env int", env: map[string]string{"VIGIL_AGENTS": "x"}, want: `--agents (from VIGIL_AGENTS): "x" must be a whole number`},
		{name: "env duration", env: map[string]string{"VIGIL_HEARTBEAT_INTERVAL": "soon"}, want: `--heartbeat-interval (from VIGIL_HEARTBEAT_INTERVAL): "soon" must be a duration`},
		{name: "file int", file: "agents: lots\n", want: `--agents (from config file key agents): "lots" must be a whole number`},
		{name: "file range", file: "agents: 99\n", want: `--agents (from config file key agents): 99 is outside 0..64`},
		{name: "env range", env: map[string]string{"VIGIL_AGENTS": "-1"}, want: `--agents (from VIGIL_AGENTS): -1 is outside 0..64`},
		{name: "flag range", args: []string{"--agents", "65"}, want: `--agents: 65 is outside 0..64`},
		{name: "pool size", args: []string{"--db-max-conns", "0"}, want: `--db-max-conns: 0 is outside 1..1000`},
		{name: "agent conns above the pool", args: []string{"--db-max-conns", "8", "--db-agent-conns", "9"},
			want: `--db-agent-conns: 9 is outside 1..8 (--db-max-conns)`},
		{name: "file pool size", file: "db-heartbeat-conns: 0\n", want: `--db-heartbeat-conns (from config file key db-heartbeat-conns): 0 is outside 1..1000`},
		{name: "negative database wait", args: []string{"--database-wait", "-1s"}, want: `--database-wait: -1s is negative`},
		{name: "env negative database wait", env: map[string]string{"VIGIL_DATABASE_WAIT": "-5s"},
			want: `--database-wait (from VIGIL_DATABASE_WAIT): -5s is negative`},
		{name: "file negative database wait", file: "database-wait: -2s\n", want: `--database-wait (from config file key database-wait): -2s is negative`},
		{name: "negative claim window", args: []string{"--agent-claim-window", "-1ms"},
			want: `--agent-claim-window: -1ms must not be negative (0 claims as soon as one slot is free)`},
		{name: "file claim window too long", file: "agent-claim-window: 2s\n",
			want: `--agent-claim-window (from config file key agent-claim-window): 2s must be at most 1s`},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			args := append(append([]string{}, base...), c.args...)
			if c.file != "" {
				require.NoError(t, os.WriteFile(cfg, []byte(c.file), 0o600))
				args = append(args, "--config", cfg)
			}
			r := runCLI(t, args...)
			assert.Equal(t, exitUsage, r.code, "%v", r.err)
			require.Error(t, r.err)
			assert.Contains(t, r.err.Error(), c.want)
			for _, raw := range []string{"strconv", "invalid syntax", "time: invalid", "invalid argument"} {
				assert.NotContains(t, r.err.Error(), raw)
			}
		})
	}
}

func TestUnknownConfigKeyIsAnError(t *testing.T) {
	base := liteBase(t)
	cfg := filepath.Join(t.TempDir(), "vigil.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("agnets: 2\nrecovery:\n  agent-lost-treshold: 90s\n  sweep-interval: 10s\nzzz-not-a-setting: 1\n"), 0o600))
	r := runCLI(t, append(base, "--config", cfg)...)
	assert.Equal(t, exitUsage, r.code)
	require.Error(t, r.err)
	msg := r.err.Error()
	assert.Contains(t, msg, `config `+cfg+`: unknown key "agnets"; did you mean "agents"?`)
	assert.Contains(t, msg, `unknown key "recovery.agent-lost-treshold"; did you mean "recovery.agent-lost-threshold"?`)
	assert.Contains(t, msg, `unknown key "zzz-not-a-setting"`)
	assert.NotContains(t, msg, `"zzz-not-a-setting"; did you mean`, "no suggestion when nothing is close")

	// A key of another command (one file for lite, server and agent) is fine.
	require.NoError(t, os.WriteFile(cfg, []byte("agents: 0\netcd-endpoints: [a:2379]\n"), 0o600))
	r = runCLI(t, append(base, "--config", cfg, "--listen", "127.0.0.1:0", "--heartbeat-interval", "500ms")...)
	assert.Equal(t, exitUsage, r.code)
	assert.NotContains(t, r.err.Error(), "unknown key")
	assert.Contains(t, r.err.Error(), "--heartbeat-interval")
}

// A text log written to a file is never coloured.
func TestTextLogToFileHasNoColour(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lite.log")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	cmd, _, err := newRootCmd().Find([]string{"lite"})
	require.NoError(t, err)
	require.NoError(t, cmd.ParseFlags([]string{"--log-format", "text"})) // merges the root's --log-format
	log, err := newLogger(cmd, f)
	require.NoError(t, err)
	log.Error("boom", "exit_code", 1)
	require.NoError(t, f.Sync())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(b), "boom")
	assert.NotContains(t, string(b), "\x1b[", "no ANSI escapes in a file")
}

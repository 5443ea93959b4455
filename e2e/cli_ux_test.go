package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/vigil-sched/vigil/api/protocol"
)

// TestCLIAsANewUserSeesIt runs the real binary against a real Lite for
// the CLI promises that need a server: errors said once, a
// server-rejected value exiting 2, output formats with the API's shape
// and the server's version, help examples and event times in
// milliseconds.
func TestCLIAsANewUserSeesIt(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "chain", `
dag_id: chain
tasks:
  - id: boom
    retries: 0
    command: ["sh", "-c", "exit 1"]
  - id: after
    depends_on: [boom]
    command: ["true"]
`)
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 1})
	env := []string{"VIGIL_SERVER=" + lite.URL, "VIGIL_TOKEN=" + operatorToken}

	// 2: the upstream failure is said once in the progress lines.
	r := runVigil(t, env, "runs", "trigger", "chain", "--wait", "--poll", "100ms")
	assert.Equal(t, 3, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "after upstream_failed: boom failed")
	assert.NotContains(t, r.Stdout, "upstream_failed: upstream_failed")
	runID := regexp.MustCompile(`run (\d+) of chain`).FindStringSubmatch(r.Stdout)
	require.Len(t, runID, 2, r.Stdout)

	// 2: cancelling an ended run is one sentence.
	r = runVigil(t, env, "runs", "cancel", runID[1])
	assert.Equal(t, 1, r.Code)
	assert.Equal(t, fmt.Sprintf("vigil: cancel run %s: it is already failed (HTTP 409)\n", runID[1]), r.Stderr)

	// 3: a value the server rejects exits 2 and names the flag typed.
	r = runVigil(t, env, "thresholds", "set", "--agent-lost", "1500ms")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "--agent-lost: 1.5s must be at least 2 × the heartbeat interval")

	// 5: json and yaml hold the API's reply; the server's version is read.
	var api protocol.RunList
	getJSON(t, lite, "/v1/runs", &api)
	r = runVigil(t, env, "runs", "list", "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var fromCLI protocol.RunList
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &fromCLI))
	assert.Equal(t, api, fromCLI)
	r = runVigil(t, env, "runs", "list", "-o", "yaml")
	require.Equal(t, 0, r.Code, r.Stderr)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.Stdout), &doc))
	assert.Contains(t, doc, "runs", "yaml has the API's top-level key")
	r = runVigil(t, env, "runs", "list", "-o", "name")
	assert.Equal(t, runID[1]+"\n", r.Stdout)
	r = runVigil(t, env, "version", "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.JSONEq(t, `{"client": {"version": "dev"}, "server": {"version": "dev"}}`, r.Stdout)

	// 8: help has examples.
	r = runVigil(t, nil, "runs", "list", "--help")
	assert.Contains(t, r.Stdout, "Examples:\n")

	// 12: event times in milliseconds.
	r = runVigil(t, env, "runs", "events", runID[1])
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Regexp(t, `(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\S*\s+run_queued`, r.Stdout)
}

// TestCLIWithoutAServer runs the real binary for the CLI
// promises that fail before any server: a server that is down, config and
// env errors, every bad DAG file and a busy listen port.
func TestCLIWithoutAServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	busy := ln.Addr().String()
	closed := "http://127.0.0.1:" + strconv.Itoa(freePort(t))

	// 1: the server tried and how to point at another.
	r := runVigil(t, []string{"VIGIL_SERVER=" + closed, "VIGIL_TOKEN=x"}, "runs", "list")
	assert.Equal(t, 1, r.Code)
	assert.Contains(t, r.Stderr, "cannot reach the Vigil server at "+closed)
	assert.Contains(t, r.Stderr, "--server URL or VIGIL_SERVER=URL")
	assert.NotContains(t, r.Stderr, "dial tcp")

	noDB := []string{"--database-url", "postgres://127.0.0.1:1/none", "--data-dir", t.TempDir(), "--log-format", "json", "--agents", "0"}

	// 4: the source is named, in words; an unknown key is an error.
	r = runVigil(t, []string{"VIGIL_HEARTBEAT_INTERVAL=15"}, append([]string{"lite"}, noDB...)...)
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, `--heartbeat-interval (from VIGIL_HEARTBEAT_INTERVAL): "15" must be a duration`)
	assert.NotContains(t, r.Stderr, "time: ")
	cfg := filepath.Join(t.TempDir(), "vigil.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("heartbeat-intervall: 15s\n"), 0o600))
	r = runVigil(t, nil, append([]string{"lite", "--config", cfg}, noDB...)...)
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, `unknown key "heartbeat-intervall"; did you mean "heartbeat-interval"?`)

	// 10: every bad file, nothing applied.
	dir := t.TempDir()
	writeDAG(t, dir, "good", "dag_id: good\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	writeDAG(t, dir, "bad1", "dag_id: bad1\ntasks: []\n")
	writeDAG(t, dir, "bad2", "dag_id: [\n")
	r = runVigil(t, []string{"VIGIL_SERVER=" + closed, "VIGIL_TOKEN=x"}, "dags", "apply", dir)
	assert.Equal(t, 1, r.Code)
	assert.Contains(t, r.Stderr, "bad1")
	assert.Contains(t, r.Stderr, "bad2")
	assert.Contains(t, r.Stderr, "nothing applied")

	// 11: a busy port is found first, with the hint.
	start := time.Now()
	r = runVigil(t, nil, append([]string{"lite", "--listen", busy}, noDB...)...)
	assert.NotEqual(t, 0, r.Code)
	assert.Contains(t, r.Stderr, "--listen "+busy+": the address is already in use")
	assert.Contains(t, r.Stderr, "with --listen")
	assert.NotContains(t, strings.ToLower(r.Stderr), "postgres")
	assert.Less(t, time.Since(start), 10*time.Second)
}

// TestLiteTextLogIsClean: Lite's text log written
// to a file has no ANSI escapes, exit codes as numbers, no command at
// info level, and each agent under its name and id only.
func TestLiteTextLogIsClean(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "fails", "dag_id: fails\ntasks:\n  - id: boom\n    retries: 0\n    command: [\"sh\", \"-c\", \"exit 1\"]\n")
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 1, Extra: []string{"--log-format", "text"}})
	_, code := triggerJSON(t, lite, "fails", true)
	assert.Equal(t, 3, code)
	lite.Stop()
	b, err := os.ReadFile(lite.LogPath())
	require.NoError(t, err)
	log := string(b)
	assert.Contains(t, log, "task instance completed")
	assert.NotContains(t, log, "\x1b[", "no colour in a file")
	assert.Regexp(t, `exit_code=1\b`, log)
	assert.NotContains(t, log, "exit_code=0x", "the exit code, not a pointer")
	assert.NotRegexp(t, `(?m)claimed.*command=`, log, "the command only at debug level")
	assert.NotRegexp(t, `(?m)\bagent=\d`, log, "no third agent id")
}

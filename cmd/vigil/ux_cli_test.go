package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/store/storetest"
)

// Tests of the CLI: what a new user sees when something goes
// wrong, and the output formats.

// TestServerDownNamesServerAndHowToPointElsewhere: no raw dial
// error, but the server tried and the two ways to name another.
func TestServerDownNamesServerAndHowToPointElsewhere(t *testing.T) {
	clearClientEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	r := runCLI(t, "runs", "list", "--server", url, "--token", fakeToken)
	assert.Equal(t, exitError, r.code)
	require.Error(t, r.err)
	msg := r.err.Error()
	assert.Contains(t, msg, "cannot reach the Vigil server at "+url+": connection refused")
	assert.Contains(t, msg, "--server")
	assert.Contains(t, msg, "VIGIL_SERVER")
	assert.NotContains(t, msg, "dial tcp", "no raw Go dial error")
	assert.NotContains(t, msg, `Get "`, "no raw *url.Error")
}

// TestErrorsSayItOnce: a conflict and an upstream failure read as
// one sentence each, with no word repeated from code, state or reason.
func TestErrorsSayItOnce(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	// The message the real API sends for a store conflict (api.storeMessage).
	f.reply("POST /v1/runs/1/cancel", http.StatusConflict, protocol.ErrorBody{Error: protocol.ErrorDetail{
		Code: protocol.CodeConflict, Message: "cancel run 1: it is already success"}})
	r := runCLI(t, append([]string{"runs", "cancel", "1"}, f.serverArgs()...)...)
	require.Error(t, r.err)
	assert.Equal(t, "cancel run 1: it is already success (HTTP 409)", r.err.Error())

	boom := fakeTI("boom", "failed")
	boom.Reason, boom.Message = "exit_code", "exited with status 1"
	after := fakeTI("after", "upstream_failed")
	after.Reason, after.Message = "upstream_failed", "upstream failed: boom failed"
	final := fakeRunDetail("failed", boom, after)
	final.Reason, final.Message = "failed", "task boom failed"
	f.reply("POST /v1/dags/pipeline/runs", http.StatusCreated, fakeQueuedRun())
	f.sequence("GET /v1/runs/12", final)
	r = runCLI(t, append([]string{"runs", "trigger", "pipeline", "--wait", "--poll", "10ms"}, f.serverArgs()...)...)
	assert.Equal(t, exitRunFailed, r.code)
	assert.Contains(t, r.stdout, "  after upstream_failed: boom failed\n")
	assert.NotContains(t, r.stdout, "upstream_failed: upstream_failed")
	assert.Contains(t, r.stdout, "run 12 failed: task boom failed\n", "a reason equal to the state is not repeated")
}

// TestThresholdsSetNamesTheFlagTyped: a value the server rejects
// names --agent-lost, the flag typed, not the server's flag or the API's
// field, and exits 2 like a value rejected locally.
func TestThresholdsSetNamesTheFlagTyped(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	// The reply of the real API (api.putThresholds names JSON fields).
	f.reply("PUT /v1/thresholds", http.StatusBadRequest, protocol.ErrorBody{Error: protocol.ErrorDetail{
		Code: protocol.CodeBadRequest, Message: "agent_lost: 5s must be at least 2 × the heartbeat interval (15s), i.e. ≥ 30s"}})
	r := runCLI(t, append([]string{"thresholds", "set", "--agent-lost", "5s"}, f.serverArgs()...)...)
	assert.Equal(t, exitUsage, r.code)
	require.Error(t, r.err)
	assert.Equal(t, "--agent-lost: 5s must be at least 2 × the heartbeat interval (15s), i.e. ≥ 30s", r.err.Error())
	assert.NotContains(t, r.err.Error(), "threshold")

	r = runCLI(t, append([]string{"thresholds", "set", "--agent-lost", "-5s"}, f.serverArgs()...)...)
	assert.Equal(t, exitUsage, r.code, "rejected locally: the same exit code")
}

// TestLiteThresholdNamesItsSource: Lite names a bad threshold by
// where it came from: the flag, the variable or the config file key.
func TestLiteThresholdNamesItsSource(t *testing.T) {
	clearClientEnv(t)
	t.Setenv("VIGIL_AGENT_LOST_THRESHOLD", "")
	require.NoError(t, os.Unsetenv("VIGIL_AGENT_LOST_THRESHOLD"))
	base := []string{"lite", "--database-url", "postgres://127.0.0.1:1/none", "--heartbeat-interval", "15s"}

	r := runCLI(t, append(base, "--agent-lost-threshold", "20s")...)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.err.Error(), "--agent-lost-threshold: 20s must be at least 2 × the heartbeat interval")

	t.Setenv("VIGIL_AGENT_LOST_THRESHOLD", "21s")
	r = runCLI(t, base...)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.err.Error(), "--agent-lost-threshold (from VIGIL_AGENT_LOST_THRESHOLD): 21s must be at least")
	require.NoError(t, os.Unsetenv("VIGIL_AGENT_LOST_THRESHOLD"))

	cfg := filepath.Join(t.TempDir(), "vigil.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("recovery:\n  agent-lost-threshold: 22s\n"), 0o600))
	r = runCLI(t, append(base, "--config", cfg)...)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.err.Error(), "--agent-lost-threshold (from config file key recovery.agent-lost-threshold): 22s must be at least")
}

// TestDagsApplyReportsEveryBadFile.
func TestDagsApplyReportsEveryBadFile(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	dir := t.TempDir()
	writeSpecFile(t, dir, "a.yaml", "alpha")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.yaml"), []byte("dag_id: beta\ntasks: []\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c.yaml"), []byte("dag_id: [\n"), 0o644))
	writeSpecFile(t, dir, "d.yaml", "alpha") // a duplicate dag_id
	r := runCLI(t, append([]string{"dags", "apply", dir}, f.serverArgs()...)...)
	require.Error(t, r.err)
	msg := r.err.Error()
	for _, bad := range []string{"b.yaml", "c.yaml", "d.yaml"} {
		assert.Contains(t, msg, filepath.Join(dir, bad), "every bad file is reported")
	}
	assert.Contains(t, msg, "nothing applied")
	assert.Empty(t, f.requestLog(), "nothing is sent when a file is bad")
}

// TestLiteBusyPortFailsBeforeDatabase: a busy --listen fails at
// once, with a hint, before Lite touches the database (here one that does
// not exist, which would otherwise be the error).
func TestLiteBusyPortFailsBeforeDatabase(t *testing.T) {
	clearClientEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	start := time.Now()
	r := runCLI(t, "lite", "--listen", ln.Addr().String(), "--database-url", "postgres://127.0.0.1:1/none",
		"--data-dir", t.TempDir(), "--agents", "0", "--log-format", "json")
	require.Error(t, r.err)
	msg := r.err.Error()
	assert.Contains(t, msg, "--listen "+ln.Addr().String()+": the address is already in use")
	assert.Contains(t, msg, "pick a free address with --listen")
	assert.NotContains(t, msg, "postgres", "the port is checked before the database")
	assert.Less(t, time.Since(start), 5*time.Second)
}

// TestLiteStartErrorNamesTheFlag: an error of the control plane's
// start-up names the flag behind the Config field (here DAGs, which is
// read after the store is open), and exits 1, not 2: the value was valid,
// the folder was not there.
func TestLiteStartErrorNamesTheFlag(t *testing.T) {
	clearClientEnv(t)
	missing := filepath.Join(t.TempDir(), "no-dags")
	r := runCLI(t, "lite", "--listen", "127.0.0.1:0", "--database-url", storetest.DB(t), "--database-wait", "0",
		"--data-dir", t.TempDir(), "--agents", "0", "--dags", missing, "--log-format", "json")
	require.Error(t, r.err)
	assert.Equal(t, exitError, r.code)
	assert.True(t, strings.HasPrefix(r.err.Error(), "--dags: "), "%v", r.err)
	assert.Contains(t, r.err.Error(), missing)
}

// TestEventTimesHaveMilliseconds: events 250 ms apart keep
// their order readable in the table.
func TestEventTimesHaveMilliseconds(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	t0 := cliTime(0)
	f.reply("GET /v1/runs/12/events", http.StatusOK, protocol.EventList{Events: []protocol.Event{
		{ID: 1, RunID: 12, Time: t0, Kind: "run_queued", Message: "triggered"},
		{ID: 2, RunID: 12, Time: t0.Add(250 * time.Millisecond), Kind: "run_started", Message: "run started"},
	}})
	r := runCLI(t, append([]string{"runs", "events", "12"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	first, second := strings.Fields(lines[1])[0], strings.Fields(lines[2])[0]
	assert.Regexp(t, `T10:00:00\.000`, first)
	assert.Regexp(t, `T10:00:00\.250`, second)
}

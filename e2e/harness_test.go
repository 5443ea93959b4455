// Package e2e runs Vigil end to end with real processes: the vigil binary
// built once per test binary, `vigil lite` and `vigil agent` started as
// child processes on loopback ports, the CLI run as a subprocess, and a
// real PostgreSQL database per test from store/storetest (docs/design.md §11).
//
// Every process is started by the harness and ended by its pid: SIGTERM,
// a bounded wait, then SIGKILL. Each one also carries a private marker in
// its environment and a private TMPDIR; its task processes inherit the
// TMPDIR only (tasks get a clean environment, docs/task-environment.md).
// Once the process has ended, any process still carrying either (a task
// orphaned despite its supervisor, say) is killed by pid, so no test
// leaves processes behind.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/internal/proctest"
	"github.com/vigil-sched/vigil/internal/testhook"
	"github.com/vigil-sched/vigil/store/storetest"
)

// Tokens every Lite of these tests uses.
const (
	agentToken    = "e2e-agent-token-0123"
	operatorToken = "e2e-operator-token"
)

// Bounds of the harness's waits.
const (
	readyTimeout = 60 * time.Second // a started Lite answers /readyz 200
	stopTimeout  = 30 * time.Second // SIGTERM to exit, before SIGKILL
	killTimeout  = 10 * time.Second // SIGKILL to exit
	cliTimeout   = 3 * time.Minute  // one CLI invocation
	httpTimeout  = 10 * time.Second // one API request
)

// markerEnv names the environment variable that marks a started process
// and, through inheritance, every task process it runs.
const markerEnv = "VIGIL_E2E_MARKER"

// binDirPattern names the directory holding the binary built by TestMain;
// owner.pid in it lets a later run remove a directory left by a test
// binary that could not clean up (storetest.Main ends with os.Exit).
const binDirPattern = "vigil-e2e-bin-*"

// vigilBin is the path of the vigil binary built by TestMain.
var vigilBin string

func TestMain(m *testing.M) {
	sweepBinDirs()
	dir, err := os.MkdirTemp("", binDirPattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	if err := buildBinary(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	vigilBin = filepath.Join(dir, "vigil")
	storetest.Main(m)
}

// buildBinary builds ./cmd/vigil and, beside it as an install has it,
// ./cmd/vigil-supervise (the agents' task supervisor) into dir, and
// records this process as the directory's owner.
func buildBinary(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	return proctest.Build(dir, proctest.Commands...)
}

// testHookBin builds, once per test binary, a vigil with the e2e test
// hooks compiled in (go build -tags testhook.Tag) into a directory of its
// own beside vigilBin, and returns its path. Only the tests that switch a
// hook on use it; every other test runs the binary an install has.
var testHookBin = sync.OnceValues(func() (string, error) {
	dir := filepath.Join(filepath.Dir(vigilBin), "testhooks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return filepath.Join(dir, "vigil"), proctest.BuildTags(dir, testhook.Tag, "./cmd/vigil")
})

// sweepBinDirs removes the binary directories of earlier test binaries
// that no longer run.
func sweepBinDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPattern))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || pidAlive(pid) {
			continue
		}
		_ = os.RemoveAll(d)
	}
}

// proc is one started vigil process (Lite or agent).
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	marker  string
	marks   []string      // KEY=VALUE environment entries that identify it and its tasks
	done    chan struct{} // closed once the process has been waited for
}

// startProc starts vigil with args and env (on top of the test process's
// environment without any VIGIL_* variable), writing stdout and stderr to
// logPath. It registers a cleanup that ends the process and its
// stragglers; the caller registers its own log printing.
func startProc(t *testing.T, name, logPath string, args, env []string) *proc {
	t.Helper()
	return startProcBin(t, vigilBin, name, logPath, args, env)
}

// startProcBin is startProc with another copy of the vigil binary, bin.
func startProcBin(t *testing.T, bin, name, logPath string, args, env []string) *proc {
	t.Helper()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	p := &proc{name: name, logPath: logPath, marker: randomHex(8), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(cleanEnv(), env...)
	p.cmd.Env = append(p.cmd.Env, markerEnv+"="+p.marker)
	p.marks = []string{markerEnv + "=" + p.marker}
	for _, kv := range env {
		if strings.HasPrefix(kv, "TMPDIR=") {
			p.marks = append(p.marks, kv) // tasks inherit TMPDIR, not the marker
		}
	}
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.Dir = filepath.Dir(logPath)
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	_ = logFile.Close() // the child holds its own descriptor
	t.Logf("%s: started pid %d: vigil %s", name, p.cmd.Process.Pid, strings.Join(args, " "))
	go func() {
		_ = p.cmd.Wait() // the exit status is in p.cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			began := time.Now()
			p.stop(t)
			t.Logf("%s: stopped in %s (exit code %d)", name, time.Since(began).Round(time.Millisecond), p.exitCode())
		}
		p.killStragglers(t)
	})
	return p
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitCode is the process's exit code; -1 while it runs or when a signal
// ended it.
func (p *proc) exitCode() int {
	if !p.exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// signal sends sig to the process unless it has already been waited for.
func (p *proc) signal(sig syscall.Signal) {
	if p.exited() {
		return
	}
	_ = syscall.Kill(p.pid(), sig)
}

// stop sends SIGTERM, waits up to stopTimeout, then kills. It reports
// whether the process exited on SIGTERM (a no-op if it had exited).
func (p *proc) stop(t *testing.T) bool {
	t.Helper()
	if p.exited() {
		return true
	}
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(stopTimeout):
		t.Errorf("%s (pid %d) still running %s after SIGTERM; sending SIGKILL", p.name, p.pid(), stopTimeout)
		p.kill(t)
		return false
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	p.signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(killTimeout):
		t.Errorf("%s (pid %d) still not reaped %s after SIGKILL", p.name, p.pid(), killTimeout)
	}
}

// waitExit waits up to timeout for the process to exit on its own and
// returns its exit code, or fails t.
func (p *proc) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.exitCode()
	case <-time.After(timeout):
		t.Fatalf("%s (pid %d) did not exit within %s", p.name, p.pid(), timeout)
		return -1
	}
}

// killStragglers SIGKILLs every process, by pid, that still carries the
// process's marker or private TMPDIR: task processes orphaned when their
// agent died.
func (p *proc) killStragglers(t *testing.T) {
	t.Helper()
	for _, pid := range markedPids(p.marks...) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			t.Logf("%s: killed leftover process %d", p.name, pid)
		}
	}
}

// markedPids lists the live processes whose environment holds one of
// marks (KEY=VALUE entries).
func markedPids(marks ...string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !slices.ContainsFunc(marks, func(m string) bool {
			return bytes.HasPrefix(env, []byte(m+"\x00")) || bytes.Contains(env, []byte("\x00"+m+"\x00"))
		}) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// cleanEnv is the test process's environment without VIGIL_* variables, so
// that nothing from the caller's shell configures the processes under test.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VIGIL_") {
			env = append(env, kv)
		}
	}
	return env
}

// printLogTail registers a cleanup that prints the end of path when t
// has failed. Register it before the process's stop cleanup, so that it
// runs after the process has ended and the log is complete.
func printLogTail(t *testing.T, name, path string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Logf("--- last lines of %s (%s) ---\n%s", name, path, tailFile(path, 80, 16<<10))
	})
}

// tailFile returns at most the last lines lines and maxBytes bytes of path.
func tailFile(path string, lines, maxBytes int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > maxBytes {
		b = b[len(b)-maxBytes:]
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// liteOpts configures startLite.
type liteOpts struct {
	// DAGs is the --dags directory or file; empty passes no --dags.
	DAGs string
	// Agents is --agents (0 is a Lite with no in-process agents).
	Agents int
	// DatabaseURL reuses a database; empty takes a fresh storetest.DB.
	DatabaseURL string
	// Port fixes the port; 0 picks a free one.
	Port int
	// NoListenFlag leaves out --listen; Lite must then listen on Port
	// through its env or config file (configuration tests).
	NoListenFlag bool
	// Env adds KEY=VALUE variables to Lite's environment.
	Env []string
	// Extra flags go after the harness's, so they override them.
	Extra []string
	// PrivateCluster starts Lite's own PostgreSQL under its data
	// directory (no --database-url), and passes the tokens as the files
	// agent.token and operator.token there (mode 0644, which Lite
	// tightens), not as flags.
	PrivateCluster bool
}

// liteProc is a running (or stopped) `vigil lite`.
type liteProc struct {
	t           *testing.T
	URL         string // http://127.0.0.1:PORT
	Port        int
	DatabaseURL string
	DataDir     string
	TmpDir      string // TMPDIR of Lite and so of its in-process tasks
	args, env   []string
	starts      int
	p           *proc
}

// startLite starts `vigil lite` on a loopback port with its own database,
// data directory and TMPDIR, and waits until GET /readyz answers 200.
// Besides the brief's flags it passes --drain-timeout 5s, so that a
// SIGTERM ends even a Lite whose agents still run tasks within stopTimeout.
func startLite(t *testing.T, opts liteOpts) *liteProc {
	t.Helper()
	dbURL := opts.DatabaseURL
	if dbURL == "" && !opts.PrivateCluster {
		dbURL = storetest.DB(t) // its drop is registered before the stop
	}
	port := opts.Port
	if port == 0 {
		port = freePort(t)
	}
	l := &liteProc{
		t: t, URL: fmt.Sprintf("http://127.0.0.1:%d", port), Port: port, DatabaseURL: dbURL,
		DataDir: filepath.Join(t.TempDir(), "data"), TmpDir: t.TempDir(),
	}
	l.args = []string{"lite", "--data-dir", l.DataDir, "--agents", strconv.Itoa(opts.Agents),
		"--log-format", "json", "--tick-interval", "200ms", "--heartbeat-interval", "1s", "--drain-timeout", "5s"}
	if opts.PrivateCluster {
		require.NoError(t, os.Mkdir(l.DataDir, 0o755))
		for name, tok := range map[string]string{"agent.token": agentToken, "operator.token": operatorToken} {
			require.NoError(t, os.WriteFile(filepath.Join(l.DataDir, name), []byte(tok+"\n"), 0o644))
		}
	} else {
		l.args = append(l.args, "--database-url", dbURL, "--agent-token", agentToken, "--operator-token", operatorToken)
	}
	if !opts.NoListenFlag {
		l.args = append(l.args, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	}
	if opts.DAGs != "" {
		dags, err := filepath.Abs(opts.DAGs)
		require.NoError(t, err)
		l.args = append(l.args, "--dags", dags)
	}
	l.args = append(l.args, opts.Extra...)
	l.env = append([]string{"TMPDIR=" + l.TmpDir}, opts.Env...)
	l.start()
	return l
}

// start runs the process with the recorded arguments and waits until it
// is ready.
func (l *liteProc) start() {
	t := l.t
	t.Helper()
	l.starts++
	name := fmt.Sprintf("lite#%d", l.starts)
	logPath := filepath.Join(t.TempDir(), name+".log")
	printLogTail(t, name, logPath)
	l.p = startProc(t, name, logPath, l.args, l.env)
	l.waitReady()
}

// waitReady waits until GET /readyz is 200, failing fast if Lite exits.
func (l *liteProc) waitReady() {
	t := l.t
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if l.p.exited() {
			t.Fatalf("%s exited with code %d before it was ready", l.p.name, l.p.exitCode())
		}
		resp, err := client.Get(l.URL + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready at %s/readyz within %s (last error %v)", l.p.name, l.URL, readyTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Pid is the pid of the current Lite process.
func (l *liteProc) Pid() int { return l.p.pid() }

// ExitCode is the exit code of the current Lite process once it has
// exited; -1 while it runs or when a signal ended it.
func (l *liteProc) ExitCode() int { return l.p.exitCode() }

// LogPath is the output file of the current Lite process.
func (l *liteProc) LogPath() string { return l.p.logPath }

// Stop sends SIGTERM and waits (bounded) for Lite to exit; it fails t if
// Lite needed a SIGKILL.
func (l *liteProc) Stop() {
	l.t.Helper()
	if !l.p.stop(l.t) {
		l.t.Errorf("%s did not stop on SIGTERM", l.p.name)
	}
}

// Kill sends SIGKILL and waits until Lite is gone. Its in-process agents'
// task processes die with it: their supervisors kill their process groups
// (SIGTERM, SIGKILL after the kill grace); the test's cleanup kills any
// straggler.
func (l *liteProc) Kill() {
	l.t.Helper()
	l.p.kill(l.t)
}

// Restart starts Lite again, with the same database, port, data directory
// and flags, after Stop or Kill.
func (l *liteProc) Restart() {
	l.t.Helper()
	require.True(l.t, l.p.exited(), "Restart needs the previous Lite stopped")
	l.start()
}

// RestartWith starts Lite again like Restart, with extra flags appended
// to the recorded ones for this and every later start (a later flag
// overrides an earlier one).
func (l *liteProc) RestartWith(extra ...string) {
	l.t.Helper()
	l.args = append(l.args, extra...)
	l.Restart()
}

// killHard SIGKILLs the process, waits until it is gone, then kills by pid
// the task processes it orphaned (those still carrying its marker) and
// returns their pids.
func (p *proc) killHard(t *testing.T) []int {
	t.Helper()
	p.kill(t)
	orphans := markedPids(p.marks...)
	p.killStragglers(t)
	return orphans
}

// startAgent starts a remote `vigil agent` against servers. It passes
// --drain-timeout 5s before extra (which may override it), so that a
// SIGTERM ends it within stopTimeout.
func startAgent(t *testing.T, servers []string, token, name string, extra ...string) *proc {
	t.Helper()
	return startAgentBin(t, vigilBin, servers, token, name, extra...)
}

// startAgentBin is startAgent with another copy of the vigil binary, bin.
func startAgentBin(t *testing.T, bin string, servers []string, token, name string, extra ...string) *proc {
	t.Helper()
	args := []string{"agent", "--server", strings.Join(servers, ","), "--token", token, "--name", name,
		"--log-format", "json", "--claim-wait", "1s", "--drain-timeout", "5s"}
	args = append(args, extra...)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "agent-"+name+".log")
	printLogTail(t, "agent "+name, logPath)
	return startProcBin(t, bin, "agent "+name, logPath, args, []string{"TMPDIR=" + dir})
}

// agentID waits until the agent has logged its registration and returns
// the agent_id it was given.
func agentID(t *testing.T, a *proc, timeout time.Duration) int64 {
	t.Helper()
	var id int64
	waitFor(t, timeout, func() bool {
		for _, rec := range jsonLogLines(a.logPath) {
			if rec["msg"] == "registered" {
				if f, ok := rec["agent_id"].(float64); ok {
					id = int64(f)
					return true
				}
			}
		}
		require.False(t, a.exited(), "%s exited before it registered", a.name)
		return false
	}, a.name+" registered")
	return id
}

// jsonLogLines decodes the JSON log records in path, skipping other lines.
func jsonLogLines(path string) []map[string]any {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var recs []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			recs = append(recs, rec)
		}
	}
	return recs
}

// cliResult is one CLI invocation's outcome.
type cliResult struct {
	Stdout, Stderr string
	Code           int
}

// cli runs `vigil args...` against lite and returns stdout and the exit
// code; stderr goes to the test log.
func cli(t *testing.T, lite *liteProc, args ...string) (string, int) {
	t.Helper()
	r := runVigil(t, []string{"VIGIL_SERVER=" + lite.URL, "VIGIL_TOKEN=" + operatorToken}, args...)
	return r.Stdout, r.Code
}

// runVigil runs the binary to completion (bounded by cliTimeout) with env
// added to a clean environment.
func runVigil(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, vigilBin, args...)
	cmd.Env = append(cleanEnv(), env...)
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("vigil %s: no exit within %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), cliTimeout, stdout.String(), stderr.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("vigil %s: %v", strings.Join(args, " "), err)
	}
	r := cliResult{Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()}
	t.Logf("vigil %s: exit %d", strings.Join(args, " "), r.Code)
	if r.Stderr != "" {
		t.Logf("stderr: %s", strings.TrimSpace(r.Stderr))
	}
	return r
}

// apiClient is shared by the helpers; each request has its own timeout.
var apiClient = &http.Client{Timeout: httpTimeout}

// tryGetJSON GETs path from lite's API with the operator token and decodes
// a 200 reply into out.
func tryGetJSON(lite *liteProc, path string, out any) error {
	return tryGetJSONAt(lite.URL, path, out)
}

// tryGetJSONAt is tryGetJSON against the server at base (a Pro replica's
// URL). It logs nothing, so a test may poll with it.
func tryGetJSONAt(base, path string, out any) error {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := apiClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: decode: %w", path, err)
	}
	return nil
}

// getJSON is tryGetJSON that fails t on error.
func getJSON(t *testing.T, lite *liteProc, path string, out any) {
	t.Helper()
	require.NoError(t, tryGetJSON(lite, path, out))
}

// metricsText is GET /metrics, which needs no token.
func metricsText(t *testing.T, lite *liteProc) string {
	t.Helper()
	resp, err := apiClient.Get(lite.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET /metrics: %s", body)
	return string(body)
}

// agentCreds remembers the credential each register reply returned, by
// server URL and agent id, so agentPost acts as that agent afterwards.
var agentCreds sync.Map // "url|id" → string

// agentPost POSTs body as JSON to lite's agent API with the agent token
// and decodes a 2xx reply into out (nil: the reply is discarded). A
// request under /v1/agents/{id}/ carries the credential that agent's
// register reply (decoded by agentPost) returned.
func agentPost(t *testing.T, lite *liteProc, path string, body, out any) {
	t.Helper()
	var cred string
	var id int64
	if _, err := fmt.Sscanf(path, "/v1/agents/%d/", &id); err == nil {
		if c, ok := agentCreds.Load(fmt.Sprintf("%s|%d", lite.URL, id)); ok {
			cred = c.(string)
		}
	}
	status, reply := agentCall(t, lite, agentToken, cred, path, body)
	require.True(t, status >= 200 && status < 300, "POST %s: %d: %s", path, status, reply)
	if out != nil {
		require.NoError(t, json.Unmarshal(reply, out), "POST %s: decode %s", path, reply)
	}
	if reg, ok := out.(*protocol.RegisterResponse); ok {
		agentCreds.Store(fmt.Sprintf("%s|%d", lite.URL, reg.AgentID), reg.Credential)
	}
}

// agentCall POSTs body as JSON to path of lite's agent API with token
// (and credential when set), whatever the reply, and returns its status
// and body. Its timeout leaves room for a claim's long poll.
func agentCall(t *testing.T, lite *liteProc, token, credential, path string, body any) (int, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, lite.URL+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if credential != "" {
		req.Header.Set(protocol.HeaderAgentCredential, credential)
	}
	resp, err := (&http.Client{Timeout: httpTimeout + 30*time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	reply, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, reply
}

// runDetail is GET /v1/runs/{id}.
func runDetail(t *testing.T, lite *liteProc, id int64) protocol.RunDetail {
	t.Helper()
	var d protocol.RunDetail
	getJSON(t, lite, fmt.Sprintf("/v1/runs/%d", id), &d)
	return d
}

// runEvents is every event of run id, oldest first: GET
// /v1/runs/{id}/events page after page.
func runEvents(t *testing.T, lite *liteProc, id int64) []protocol.Event {
	t.Helper()
	events, err := tryRunEvents(lite, id)
	require.NoError(t, err)
	return events
}

// tryRunEvents reads every page of GET /v1/runs/{id}/events (the server's
// default page size), following next_cursor until it is null.
func tryRunEvents(lite *liteProc, id int64) ([]protocol.Event, error) {
	var all []protocol.Event
	after := int64(0)
	for {
		var page protocol.EventList
		if err := tryGetJSON(lite, fmt.Sprintf("/v1/runs/%d/events?after=%d", id, after), &page); err != nil {
			return all, err
		}
		all = append(all, page.Events...)
		if page.NextCursor == nil {
			return all, nil
		}
		if *page.NextCursor <= after {
			return all, fmt.Errorf("run %d events: next_cursor %d does not move past after=%d", id, *page.NextCursor, after)
		}
		after = *page.NextCursor
	}
}

// taskLogs is GET /v1/runs/{id}/tasks/{task}/logs (first page, every try).
func taskLogs(t *testing.T, lite *liteProc, id int64, task string) protocol.LogList {
	t.Helper()
	var l protocol.LogList
	getJSON(t, lite, fmt.Sprintf("/v1/runs/%d/tasks/%s/logs", id, task), &l)
	return l
}

// taskInstance returns the TI of task in d, failing t when there is none.
func taskInstance(t *testing.T, d protocol.RunDetail, task string) protocol.TaskInstance {
	t.Helper()
	for _, ti := range d.TaskInstances {
		if ti.TaskID == task {
			return ti
		}
	}
	t.Fatalf("run %d has no task instance %q", d.ID, task)
	return protocol.TaskInstance{}
}

// waitRunState polls run id until it is in state, failing t after
// timeout, and returns the detail.
func waitRunState(t *testing.T, lite *liteProc, id int64, state string, timeout time.Duration) protocol.RunDetail {
	t.Helper()
	var d protocol.RunDetail
	waitFor(t, timeout, func() bool {
		return tryGetJSON(lite, fmt.Sprintf("/v1/runs/%d", id), &d) == nil && d.State == state
	}, fmt.Sprintf("run %d %s (last seen %q)", id, state, d.State))
	return d
}

// waitFor polls cond every 100 ms until it is true, failing t with msg
// after timeout.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePort returns a loopback TCP port that was free a moment ago. Ports
// handed out in this test binary are not handed out again.
func freePort(t *testing.T) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !portsUsed[port] {
			portsUsed[port] = true
			return port
		}
	}
	t.Fatal("no free loopback port")
	return 0
}

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{}
)

// listening reports whether something accepts connections on port.
func listening(port int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// pidAlive reports whether pid names a live process. A zombie (exited,
// waiting for its parent or init to reap it) is not alive: in this VM,
// init reaps orphans only after a few seconds.
func pidAlive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false // gone between the two checks
	}
	// The state follows the parenthesised command name, which may itself
	// contain ") ".
	s := string(b)
	if i := strings.LastIndex(s, ") "); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// readPid waits until path holds a pid and returns it.
func readPid(t *testing.T, path string, timeout time.Duration) int {
	t.Helper()
	var pid int
	waitFor(t, timeout, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}, "a pid in "+path)
	return pid
}

// writeDAG writes a DAG spec into dir as <name>.yaml and returns its path.
func writeDAG(t *testing.T, dir, name, spec string) string {
	t.Helper()
	path := filepath.Join(dir, name+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(spec), 0o644))
	return path
}

// triggerJSON runs `vigil runs trigger dag [--wait] -o json` and returns
// the run (RunDetail with --wait) and the exit code.
func triggerJSON(t *testing.T, lite *liteProc, dag string, wait bool) (protocol.RunDetail, int) {
	t.Helper()
	args := []string{"runs", "trigger", dag, "-o", "json"}
	if wait {
		args = append(args, "--wait", "--poll", "200ms")
	}
	out, code := cli(t, lite, args...)
	var d protocol.RunDetail
	require.NoError(t, json.Unmarshal([]byte(out), &d), "runs trigger -o json output: %q", out)
	require.NotZero(t, d.ID, "runs trigger -o json output: %q", out)
	return d, code
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

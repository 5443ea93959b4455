package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// examplesDir holds the example DAGs (relative to this package).
const examplesDir = "../examples"

// TestLiteRunsExamplePipeline runs the example pipeline on Lite with two
// in-process agents through the CLI, and checks the run, its listing, its
// logs, its timeline and the files its tasks produced.
func TestLiteRunsExamplePipeline(t *testing.T) {
	t.Parallel()
	lite := startLite(t, liteOpts{DAGs: examplesDir, Agents: 2})

	out, code := cli(t, lite, "runs", "trigger", "pipeline", "--wait", "--poll", "200ms")
	require.Equal(t, 0, code, "runs trigger pipeline --wait:\n%s", out)
	m := regexp.MustCompile(`(?m)^run (\d+) of pipeline queued$`).FindStringSubmatch(out)
	require.NotNil(t, m, "trigger output names the run:\n%s", out)
	runID, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	assert.Contains(t, out, fmt.Sprintf("run %d success", runID))
	assert.Contains(t, out, "  report success", "progress lines show each task's end")

	d := runDetail(t, lite, runID)
	require.Equal(t, "success", d.State)
	require.Len(t, d.TaskInstances, 8)
	for _, ti := range d.TaskInstances {
		assert.Equal(t, "success", ti.State, "task %s", ti.TaskID)
		assert.NotNil(t, ti.StartedAt, "task %s started_at", ti.TaskID)
		assert.NotNil(t, ti.EndDate, "task %s end_date", ti.TaskID)
		if assert.NotNil(t, ti.ExitCode, "task %s exit_code", ti.TaskID) {
			assert.Equal(t, 0, *ti.ExitCode, "task %s exit_code", ti.TaskID)
		}
	}

	out, code = cli(t, lite, "runs", "list", "-o", "json")
	require.Equal(t, 0, code)
	var list protocol.RunList // the API's shape (GET /v1/runs)
	require.NoError(t, json.Unmarshal([]byte(out), &list), "runs list -o json: %q", out)
	runs := list.Runs
	require.Len(t, runs, 1)
	assert.Equal(t, runID, runs[0].ID)
	assert.Equal(t, "pipeline", runs[0].DAGID)
	assert.Equal(t, "success", runs[0].State)
	assert.Equal(t, 8, runs[0].TaskCounts["success"])

	out, code = cli(t, lite, "logs", strconv.FormatInt(runID, 10), "generate")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "[stdout] generate: writing 200000 records (seed 42)")
	assert.Regexp(t, `\[stdout\] generate: input\.csv is \d+ bytes, sha256 [0-9a-f]{64}`, out)
	assert.Contains(t, out, "[stdout]   records 200000")

	out, code = cli(t, lite, "runs", "events", strconv.FormatInt(runID, 10))
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	started, success := -1, -1
	for i, l := range lines {
		switch {
		case strings.Contains(l, "run_started"):
			started = i
		case strings.Contains(l, "run_success"):
			success = i
		}
	}
	require.GreaterOrEqual(t, started, 1, "run_started listed:\n%s", out)
	require.Equal(t, len(lines)-1, success, "run_success is the last event:\n%s", out)
	assert.Less(t, started, success)
	events := runEvents(t, lite, runID)
	succeeded := map[string]bool{}
	for _, e := range events {
		if e.Kind == "ti_success" {
			succeeded[e.TaskID] = true
		}
	}
	assert.Len(t, succeeded, 8, "a ti_success event per task: %v", succeeded)

	// The CLI reads the timeline a page at a time: pages of 3 events give
	// the same timeline, and --after starts past an event.
	out, code = cli(t, lite, "runs", "events", strconv.FormatInt(runID, 10), "--limit", "3", "-o", "json")
	require.Equal(t, 0, code, out)
	var paged protocol.EventList // the API's shape, every page in one
	require.NoError(t, json.Unmarshal([]byte(out), &paged))
	assert.Nil(t, paged.NextCursor, "every page was read")
	require.Greater(t, len(events), 3, "the run has several pages of 3 events")
	assert.Equal(t, events, paged.Events)
	out, code = cli(t, lite, "runs", "events", strconv.FormatInt(runID, 10), "--after", strconv.FormatInt(events[1].ID, 10), "--limit", "2", "-o", "json")
	require.Equal(t, 0, code, out)
	var pastSecond protocol.EventList
	require.NoError(t, json.Unmarshal([]byte(out), &pastSecond))
	assert.Equal(t, events[2:], pastSecond.Events)

	// The tasks really did the work: the merged aggregate has one line per
	// key (12 keys), and report removed the bulky input.
	work := filepath.Join(lite.TmpDir, "vigil-examples", "pipeline", strconv.FormatInt(runID, 10))
	merged, err := os.ReadFile(filepath.Join(work, "merged.csv"))
	require.NoError(t, err)
	assert.Len(t, strings.Split(strings.TrimSpace(string(merged)), "\n"), 12)
	assert.NoFileExists(t, filepath.Join(work, "input.csv"))
}

// TestTriggerWaitExitCodes checks `runs trigger --wait` exit codes: 3 for a
// task that exits 4 with no retries (recorded as failed, exit_code 4,
// reason exit_code), 0 for the flaky example that succeeds on its retry.
func TestTriggerWaitExitCodes(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "exit-four", `
dag_id: exit-four
tasks:
  - id: fail
    retries: 0
    command: ["sh", "-c", "echo about to exit 4; exit 4"]
  - id: downstream
    depends_on: [fail]
    command: ["true"]
`)
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 1})
	out, code := cli(t, lite, "dags", "apply", examplePath(t, "flaky.yaml"))
	require.Equal(t, 0, code, "dags apply flaky.yaml: %s", out)

	d, code := triggerJSON(t, lite, "exit-four", true)
	assert.Equal(t, 3, code, "a failed run exits 3")
	assert.Equal(t, "failed", d.State)
	d = runDetail(t, lite, d.ID)
	assert.Equal(t, "failed", d.State)
	ti := taskInstance(t, d, "fail")
	assert.Equal(t, "failed", ti.State)
	assert.Equal(t, "exit_code", ti.Reason)
	if assert.NotNil(t, ti.ExitCode) {
		assert.Equal(t, 4, *ti.ExitCode)
	}
	assert.Equal(t, 1, ti.TryNumber)
	down := taskInstance(t, d, "downstream")
	assert.Equal(t, "upstream_failed", down.State)
	assert.Nil(t, down.StartedAt, "downstream never ran")
	logs := taskLogs(t, lite, d.ID, "fail")
	require.NotEmpty(t, logs.Lines)
	assert.Equal(t, "about to exit 4", logs.Lines[0].Line)

	d, code = triggerJSON(t, lite, "flaky", true)
	assert.Equal(t, 0, code, "a successful run exits 0")
	assert.Equal(t, "success", d.State)
	d = runDetail(t, lite, d.ID)
	flaky := taskInstance(t, d, "fail-once")
	assert.Equal(t, "success", flaky.State)
	assert.Equal(t, 2, flaky.TryNumber, "fail-once succeeded on its second try")
	assert.Equal(t, "success", taskInstance(t, d, "after-retry").State)
	var retried bool
	for _, e := range runEvents(t, lite, d.ID) {
		retried = retried || (e.Kind == "ti_up_for_retry" && e.TaskID == "fail-once")
	}
	assert.True(t, retried, "the first failure of fail-once is an up_for_retry event")
	out, code = cli(t, lite, "logs", strconv.FormatInt(d.ID, 10), "after-retry")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "after-retry: fail-once succeeded on try 2")
}

// TestRemoteAgentWithTags runs a task that needs tag gpu on a Lite with no
// in-process agents: of two remote agents, only the one with the tag may
// run it.
func TestRemoteAgentWithTags(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "gpu-job", `
dag_id: gpu-job
tasks:
  - id: train
    tags: [gpu]
    command: ["sh", "-c", "echo \"parent=$(cut -d' ' -f4 /proc/$PPID/stat)\"; echo trained"]
`)
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 0})
	cpu := startAgent(t, []string{lite.URL}, agentToken, "cpu-box", "--tags", "cpu")
	gpu := startAgent(t, []string{lite.URL}, agentToken, "gpu-box", "--tags", "gpu")
	cpuID := agentID(t, cpu, 30*time.Second)
	gpuID := agentID(t, gpu, 30*time.Second)
	require.NotEqual(t, cpuID, gpuID)

	d, code := triggerJSON(t, lite, "gpu-job", true)
	require.Equal(t, 0, code)
	ti := taskInstance(t, runDetail(t, lite, d.ID), "train")
	assert.Equal(t, "success", ti.State)
	if assert.NotNil(t, ti.AgentID) {
		assert.Equal(t, gpuID, *ti.AgentID, "the TI ran on the gpu agent")
	}
	// The task's parent process is its supervisor, whose parent is the gpu
	// agent process itself.
	var lines []string
	for _, l := range taskLogs(t, lite, d.ID, "train").Lines {
		lines = append(lines, l.Line)
	}
	assert.Equal(t, []string{fmt.Sprintf("parent=%d", gpu.pid()), "trained"}, lines)
	assert.False(t, cpu.exited())
	assert.False(t, gpu.exited())
}

// TestExecutionTimeoutKillsProcessGroup checks that the agent enforces
// execution_timeout by killing the task's whole process group, including
// a background grandchild, and records reason execution_timeout.
func TestExecutionTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	pidFile := filepath.Join(t.TempDir(), "grandchild.pid")
	writeDAG(t, dags, "hang", fmt.Sprintf(`
dag_id: hang
tasks:
  - id: hang
    retries: 0
    execution_timeout: 2s
    env:
      PIDFILE: %q
    command: ["sh", "-c", "sleep 300 & echo $! > \"$PIDFILE\"; wait"]
`, pidFile))
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 1})

	began := time.Now()
	d, code := triggerJSON(t, lite, "hang", true)
	assert.Equal(t, 3, code)
	t.Logf("run %d ended after %s", d.ID, time.Since(began).Round(time.Millisecond))
	d = runDetail(t, lite, d.ID)
	assert.Equal(t, "failed", d.State)
	ti := taskInstance(t, d, "hang")
	assert.Equal(t, "failed", ti.State)
	assert.Equal(t, "execution_timeout", ti.Reason)
	require.NotNil(t, ti.StartedAt)
	require.NotNil(t, ti.EndDate)
	assert.GreaterOrEqual(t, ti.EndDate.Sub(*ti.StartedAt), 1900*time.Millisecond, "killed at the 2 s timeout, not before")
	assert.Less(t, ti.EndDate.Sub(*ti.StartedAt), 20*time.Second, "killed soon after the timeout")

	grandchild := readPid(t, pidFile, time.Second)
	waitFor(t, 5*time.Second, func() bool { return !pidAlive(grandchild) },
		fmt.Sprintf("grandchild sleep (pid %d) gone", grandchild))
	t.Logf("grandchild gone %s after the trigger", time.Since(began).Round(time.Millisecond))
}

// TestCancelKillsRunningTask cancels runs whose tasks are running: the
// runs end cancelled and the agent kills the processes at its next
// heartbeat (1 s).
func TestCancelKillsRunningTask(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "sleeper.pid")
	spec := writeDAG(t, t.TempDir(), "pid-job", fmt.Sprintf(`
dag_id: pid-job
tasks:
  - id: sleeper
    retries: 2
    env:
      PIDFILE: %q
    command: ["sh", "-c", "echo $$ > \"$PIDFILE\"; exec sleep 300"]
`, pidFile))
	lite := startLite(t, liteOpts{DAGs: examplesDir, Agents: 2})
	out, code := cli(t, lite, "dags", "apply", spec)
	require.Equal(t, 0, code, "dags apply: %s", out)

	long, code := triggerJSON(t, lite, "long", false)
	require.Equal(t, 0, code)
	sleeper, code := triggerJSON(t, lite, "pid-job", false)
	require.Equal(t, 0, code)

	// Both tasks run: started_at is set, and each process told its pid.
	for _, r := range []struct {
		id   int64
		task string
	}{{long.ID, "tick"}, {sleeper.ID, "sleeper"}} {
		waitFor(t, 30*time.Second, func() bool {
			var d protocol.RunDetail
			if tryGetJSON(lite, fmt.Sprintf("/v1/runs/%d", r.id), &d) != nil {
				return false
			}
			for _, ti := range d.TaskInstances {
				if ti.TaskID == r.task && ti.State == "running" && ti.StartedAt != nil {
					return true
				}
			}
			return false
		}, fmt.Sprintf("task %s of run %d running with started_at", r.task, r.id))
	}
	tickPid := 0
	pidLine := regexp.MustCompile(`^tick: try 1 of run \d+, pid (\d+),`)
	waitFor(t, 10*time.Second, func() bool {
		for _, l := range taskLogs(t, lite, long.ID, "tick").Lines {
			if m := pidLine.FindStringSubmatch(l.Line); m != nil {
				tickPid, _ = strconv.Atoi(m[1])
				return true
			}
		}
		return false
	}, "tick's pid in its log")
	sleeperPid := readPid(t, pidFile, 10*time.Second)
	require.True(t, pidAlive(tickPid), "tick (pid %d) runs before the cancel", tickPid)
	require.True(t, pidAlive(sleeperPid), "sleeper (pid %d) runs before the cancel", sleeperPid)

	cancelled := time.Now()
	for _, id := range []int64{long.ID, sleeper.ID} {
		out, code := cli(t, lite, "runs", "cancel", strconv.FormatInt(id, 10))
		require.Equal(t, 0, code)
		assert.Equal(t, fmt.Sprintf("run %d cancelled\n", id), out)
	}
	for _, pid := range []int{tickPid, sleeperPid} {
		waitFor(t, 5*time.Second-time.Since(cancelled), func() bool { return !pidAlive(pid) },
			fmt.Sprintf("pid %d gone within 5 s of the cancel", pid))
	}
	t.Logf("both task processes gone %s after the cancel", time.Since(cancelled).Round(time.Millisecond))

	// The cancellation sticks: no retry, though both tasks have retries.
	for _, r := range []struct {
		id   int64
		task string
	}{{long.ID, "tick"}, {sleeper.ID, "sleeper"}} {
		d := runDetail(t, lite, r.id)
		assert.Equal(t, "cancelled", d.State)
		ti := taskInstance(t, d, r.task)
		assert.Equal(t, "cancelled", ti.State, "task %s", r.task)
		assert.Equal(t, "cancelled", ti.Reason, "task %s", r.task)
		assert.Equal(t, 1, ti.TryNumber, "task %s", r.task)
		var kinds []string
		for _, e := range runEvents(t, lite, r.id) {
			kinds = append(kinds, e.Kind)
		}
		assert.Contains(t, kinds, "run_cancelled")
	}
}

// TestConfigPrecedence checks flag > env > file for `vigil lite --listen`,
// and that a bad value in the config file is a usage error naming the flag.
func TestConfigPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	filePort, envPort, flagPort := freePort(t), freePort(t), freePort(t)
	cfg := filepath.Join(dir, "vigil.yaml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil, "listen: 127.0.0.1:%d\nagents: 0\n", filePort), 0o644))
	env := []string{fmt.Sprintf("VIGIL_LISTEN=127.0.0.1:%d", envPort)}

	// env beats the file.
	lite := startLite(t, liteOpts{Port: envPort, NoListenFlag: true, Env: env, Extra: []string{"--config", cfg}})
	assert.False(t, listening(filePort), "nothing listens on the file's port %d", filePort)
	assert.Equal(t, fmt.Sprintf("http://127.0.0.1:%d", envPort), readyAPI(t, lite))
	lite.Stop()
	assert.Equal(t, 0, lite.ExitCode(), "Lite exits 0 on SIGTERM")

	// The flag beats env and file.
	lite = startLite(t, liteOpts{Port: flagPort, DatabaseURL: lite.DatabaseURL, Env: env, Extra: []string{"--config", cfg}})
	assert.False(t, listening(envPort), "nothing listens on the env's port %d", envPort)
	assert.False(t, listening(filePort), "nothing listens on the file's port %d", filePort)
	assert.Equal(t, fmt.Sprintf("http://127.0.0.1:%d", flagPort), readyAPI(t, lite))
	lite.Stop()
	assert.Equal(t, 0, lite.ExitCode())

	// A bad value in the file: exit 2, naming the flag, before serving.
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, fmt.Appendf(nil, "listen: 127.0.0.1:%d\nagents: -1\n", filePort), 0o644))
	r := runVigil(t, nil, "lite", "--config", bad, "--database-url", lite.DatabaseURL,
		"--data-dir", filepath.Join(dir, "bad-data"), "--log-format", "json")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "--agents")
	assert.False(t, listening(filePort))
}

// examplePath is the absolute path of an example DAG file (the CLI runs
// in a temporary directory).
func examplePath(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(examplesDir, name))
	require.NoError(t, err)
	require.FileExists(t, p)
	return p
}

// readyAPI returns the api address Lite logged in "vigil lite ready".
func readyAPI(t *testing.T, lite *liteProc) string {
	t.Helper()
	var api string
	waitFor(t, 10*time.Second, func() bool {
		for _, rec := range jsonLogLines(lite.LogPath()) {
			if rec["msg"] == "vigil lite ready" {
				api, _ = rec["api"].(string)
				return true
			}
		}
		return false
	}, "the 'vigil lite ready' log line")
	return api
}

// TestLiteRestart exercises the harness's Stop, Kill and Restart while a
// remote agent keeps running: Lite comes back on the same port and
// database with its runs intact and a higher fencing epoch, and the agent
// reconnects and runs new work.
func TestLiteRestart(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "hello", `
dag_id: hello
tasks:
  - id: greet
    command: ["sh", "-c", "echo \"hello from $(cut -d' ' -f4 /proc/$PPID/stat)\""]
`)
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 0})
	agent := startAgent(t, []string{lite.URL}, agentToken, "survivor")
	want := fmt.Sprintf("hello from %d", agent.pid())
	runOnAgent := func() int64 {
		t.Helper()
		d, code := triggerJSON(t, lite, "hello", true)
		require.Equal(t, 0, code)
		logs := taskLogs(t, lite, d.ID, "greet")
		require.Len(t, logs.Lines, 1)
		assert.Equal(t, want, logs.Lines[0].Line, "run %d ran on the remote agent", d.ID)
		return d.ID
	}
	first := runOnAgent()

	var epochs []float64
	leadingEpoch := func() {
		t.Helper()
		waitFor(t, 10*time.Second, func() bool {
			for _, rec := range jsonLogLines(lite.LogPath()) {
				if e, ok := rec["epoch"].(float64); ok && rec["msg"] == "leading" {
					epochs = append(epochs, e)
					return true
				}
			}
			return false
		}, "a 'leading' log line with the epoch")
	}
	leadingEpoch()

	lite.Stop()
	assert.Equal(t, 0, lite.ExitCode(), "Lite exits 0 on SIGTERM")
	assert.False(t, listening(lite.Port))
	lite.Restart()
	leadingEpoch()
	assert.Equal(t, "success", runDetail(t, lite, first).State, "the run survived the restart")
	second := runOnAgent()
	assert.Greater(t, second, first)

	lite.Kill()
	assert.False(t, listening(lite.Port))
	lite.Restart()
	leadingEpoch()
	third := runOnAgent()
	assert.Greater(t, third, second)

	require.Len(t, epochs, 3)
	assert.Less(t, epochs[0], epochs[1], "each start takes a higher fencing epoch")
	assert.Less(t, epochs[1], epochs[2], "each start takes a higher fencing epoch")
	assert.False(t, agent.exited(), "the agent outlived every Lite")
	// Stopped while Lite is up: an agent SIGTERMed with its control plane
	// down waits out its whole drain timeout even with nothing to deliver
	// (agent.flush waits for the link), which would add 5 s to the cleanup.
	require.True(t, agent.stop(t), "the agent stops on SIGTERM")
	assert.Equal(t, 0, agent.exitCode())
}

// TestCancelStopsTheProcessGroupWithinASecond: with a 10 s heartbeat
// interval, a cancel still stops the task within a second: the agent's
// stop watch hears of it at once and heartbeats for its stop order, and
// every process of the task's group (the shell and its background
// child) is gone within 1 s of `vigil runs cancel` returning.
func TestCancelStopsTheProcessGroupWithinASecond(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "group.pid")
	spec := writeDAG(t, t.TempDir(), "group-job", fmt.Sprintf(`
dag_id: group-job
tasks:
  - id: sleepers
    env:
      PIDFILE: %q
    command: ["sh", "-c", "sh -c 'trap \"sleep 0.4; exit 0\" TERM; while :; do sleep 0.05; done' & echo $$ > \"$PIDFILE\"; wait"]
`, pidFile))
	lite := startLite(t, liteOpts{Agents: 1, Extra: []string{"--heartbeat-interval", "10s", "--agent-lost-threshold", "60s"}})
	out, code := cli(t, lite, "dags", "apply", spec)
	require.Equal(t, 0, code, "dags apply: %s", out)
	run, code := triggerJSON(t, lite, "group-job", false)
	require.Equal(t, 0, code)
	pid := readPid(t, pidFile, 30*time.Second)
	pgid, err := syscall.Getpgid(pid)
	require.NoError(t, err)
	require.Equal(t, pid, pgid, "the task's shell leads its own process group")
	waitFor(t, 10*time.Second, func() bool { return len(groupMembers(pgid)) >= 2 }, "the shell and its child run")

	out, code = cli(t, lite, "runs", "cancel", strconv.FormatInt(run.ID, 10))
	require.Equal(t, 0, code, out)
	cancelled := time.Now()
	waitFor(t, time.Second, func() bool { return len(groupMembers(pgid)) == 0 },
		fmt.Sprintf("process group %d gone within 1 s of the cancel (heartbeat interval 10 s)", pgid))
	t.Logf("process group gone %s after the cancel", time.Since(cancelled).Round(time.Millisecond))
	assert.Equal(t, "cancelled", runDetail(t, lite, run.ID).State)

	// The child took 0.4 s to die after SIGTERM: the run ended then, not
	// at the cancel (docs/design.md §4 cancel).
	var cancelAt time.Time
	for _, ev := range runEvents(t, lite, run.ID) {
		if ev.Kind == "run_cancelled" {
			cancelAt = ev.Time
		}
	}
	require.False(t, cancelAt.IsZero(), "a run_cancelled event")
	waitFor(t, 5*time.Second, func() bool {
		d := runDetail(t, lite, run.ID)
		return d.EndDate != nil && d.EndDate.Sub(cancelAt) >= 300*time.Millisecond
	}, "the run's end time is when its last process ended, 0.4 s after the cancel")
}

// groupMembers lists the live (not zombie) processes of process group
// pgid, from /proc.
func groupMembers(pgid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndex(s, ") ")
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+2:]) // state, ppid, pgrp, ...
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(d, "/proc/"), "/stat"))
			out = append(out, pid)
		}
	}
	return out
}

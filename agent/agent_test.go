package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/internal/proctest"
	"github.com/vigil-sched/vigil/state"
)

// testAgent is an Agent running against a fake control plane.
type testAgent struct {
	*Agent
	stop func() error // cancels Run and returns its result
}

// startAgent runs an agent with short timings against servers; edit
// adjusts the Config, tweaks the Agent's tunables before Run. Run is
// stopped (and its processes drained) at cleanup.
func startAgent(t *testing.T, servers []string, edit func(*Config), tweaks ...func(*Agent)) *testAgent {
	t.Helper()
	cfg := Config{
		Servers: servers, Token: fakeToken, Name: "test-agent", Tags: []string{"script"},
		Capacity: 2, ClaimWait: 200 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond,
		DrainTimeout: 3 * time.Second, KillGrace: 500 * time.Millisecond, SupervisorPath: supervisorBin,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if edit != nil {
		edit(&cfg)
	}
	a, err := New(cfg)
	require.NoError(t, err)
	a.newBackoff = func() *backoff {
		return &backoff{Base: 20 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Max: 200 * time.Millisecond}
	}
	a.reqTimeout = 5 * time.Second // generous: a loaded CI host must not fake an outage
	a.shipInterval = 50 * time.Millisecond
	a.pipeWait = time.Second
	for _, tweak := range tweaks {
		tweak(a)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-errc:
			case <-time.After(15 * time.Second):
				runErr = errors.New("Run did not return")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return &testAgent{Agent: a, stop: stop}
}

// linkDown reports whether the agent considers the control plane gone.
func (a *Agent) linkDown() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st.state != stateUp
}

func sh(script string) []string { return []string{"sh", "-c", script} }

func TestRunsTaskAndReportsSuccess(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	a := startAgent(t, []string{srv.URL}, nil)
	task := f.enqueue(0, map[string]string{"GREETING": "hello"},
		sh(`echo "$GREETING"; echo oops >&2; echo "$VIGIL_RUN_ID $VIGIL_DAG_ID $VIGIL_TASK_ID $VIGIL_TRY_NUMBER $VIGIL_TI_ID $VIGIL_ATTEMPT_ID"; printf partial`)...)

	c := f.waitCompletion(task.AttemptID, 5*time.Second)
	assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	require.NotNil(t, c.ExitCode)
	assert.Equal(t, 0, *c.ExitCode)
	assert.True(t, f.isStarted(task.AttemptID), "a Started heartbeat precedes the completion")

	lines := f.lines(task.AttemptID)
	require.Len(t, lines, 4, "output is shipped before the completion")
	want := []struct{ stream, text string }{
		{"stdout", "hello"}, {"stderr", "oops"},
		{"stdout", "7 etl " + task.TaskID + " 1 " + strconv.FormatInt(task.TIID, 10) + " " + task.AttemptID},
		{"stdout", "partial"},
	}
	// stdout and stderr are separate pipes: only per-stream order is fixed.
	for i, l := range lines {
		assert.Equal(t, int64(i+1), l.Seq)
		assert.False(t, l.Time.IsZero())
	}
	for _, w := range want {
		assert.True(t, containsLine(lines, w.stream, w.text), "missing %s line %q", w.stream, w.text)
	}

	regs := f.registrations()
	require.NotEmpty(t, regs)
	assert.Equal(t, "test-agent", regs[0].Name)
	assert.Equal(t, []string{"script"}, regs[0].Tags)
	assert.Equal(t, 2, regs[0].Capacity)
	require.NoError(t, a.stop())
}

func containsLine(lines []protocol.LogLine, stream, text string) bool {
	for _, l := range lines {
		if l.Stream == stream && l.Line == text {
			return true
		}
	}
	return false
}

// TestNonZeroExitAndStartFailure checks each way a task fails on its own
// gets its own completion: an exit code (reason exit_code), a start
// failure (failure start_failed: not found, not executable) and a signal
// that Vigil did not send (failure signal, named). Before migration 003
// the last three all came without a failure and the server recorded
// exit_code with no exit code.
func TestNonZeroExitAndStartFailure(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	notExec := filepath.Join(t.TempDir(), "not-executable")
	require.NoError(t, os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644))
	exit3 := f.enqueue(0, nil, sh("echo failing; exit 3")...)
	missing := f.enqueue(0, nil, "/nonexistent/vigil-test-binary")
	notFound := f.enqueue(0, nil, "vigil-no-such-command-in-path")
	denied := f.enqueue(0, nil, notExec)
	killed := f.enqueue(0, nil, sh("kill -9 $$")...)
	termed := f.enqueue(0, nil, sh("kill -TERM $$")...)

	c := f.waitCompletion(exit3.AttemptID, 5*time.Second)
	assert.Equal(t, state.OutcomeFailed, c.Outcome)
	require.NotNil(t, c.ExitCode)
	assert.Equal(t, 3, *c.ExitCode)
	assert.Equal(t, "exit status 3", c.Error)
	assert.Empty(t, c.Failure, "a non-zero exit needs no failure: reason exit_code")
	assert.Empty(t, c.Signal)

	for task, want := range map[string]string{
		missing.AttemptID: "no such file or directory", notFound.AttemptID: "executable file not found",
		denied.AttemptID: "permission denied",
	} {
		c = f.waitCompletion(task, 5*time.Second)
		assert.Equal(t, state.OutcomeFailed, c.Outcome)
		assert.Equal(t, state.FailureStartFailed, c.Failure)
		assert.Nil(t, c.ExitCode)
		assert.Contains(t, c.Error, want)
		assert.True(t, f.isStarted(task), "a failed start still reports Started")
	}

	for task, sig := range map[string]string{killed.AttemptID: "SIGKILL", termed.AttemptID: "SIGTERM"} {
		c = f.waitCompletion(task, 5*time.Second)
		assert.Equal(t, state.OutcomeFailed, c.Outcome)
		assert.Equal(t, state.FailureSignal, c.Failure)
		assert.Equal(t, sig, c.Signal)
		assert.Nil(t, c.ExitCode)
		assert.Equal(t, "killed by signal "+sig, c.Error)
	}
}

func TestExecutionTimeoutKillsProcessGroup(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	pidfile := filepath.Join(t.TempDir(), "pid")
	task := f.enqueue(300*time.Millisecond, map[string]string{"PIDFILE": pidfile},
		sh(`sleep 300 & echo $! > "$PIDFILE"; wait`)...)

	grandchild := proctest.PidFromFile(t, pidfile)
	c := f.waitCompletion(task.AttemptID, 5*time.Second)
	assert.Equal(t, state.OutcomeExecutionTimeout, c.Outcome)
	assert.Nil(t, c.ExitCode)
	assert.Empty(t, c.Failure, "Vigil's own kill is no signal failure")
	assert.Contains(t, c.Error, "execution_timeout 300ms exceeded")
	assert.Eventually(t, func() bool { return proctest.Gone(grandchild) }, 3*time.Second, 20*time.Millisecond,
		"the grandchild in the process group must be killed")

	lines := f.lines(task.AttemptID)
	require.NotEmpty(t, lines)
	last := lines[len(lines)-1]
	assert.Equal(t, protocol.StreamSystem, last.Stream)
	assert.Contains(t, last.Line, "execution_timeout 300ms exceeded: killing process group")
}

func TestTimeoutDoesNotHangOnGrandchildHoldingStdout(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, func(c *Config) { c.KillGrace = 200 * time.Millisecond })
	pidfile := filepath.Join(t.TempDir(), "pid")
	// The grandchild ignores SIGTERM and keeps stdout open: SIGKILL after
	// the grace and the pipe wait delay must both bound the wait.
	task := f.enqueue(200*time.Millisecond, map[string]string{"PIDFILE": pidfile},
		sh(`sh -c 'trap "" TERM; echo $$ > "$PIDFILE"; while :; do sleep 0.05; done' & wait`)...)
	grandchild := proctest.PidFromFile(t, pidfile)
	c := f.waitCompletion(task.AttemptID, 5*time.Second)
	assert.Equal(t, state.OutcomeExecutionTimeout, c.Outcome)
	assert.Eventually(t, func() bool { return proctest.Gone(grandchild) }, 3*time.Second, 20*time.Millisecond)
}

func TestLeftoverDescendantsAreKilledAfterSuccess(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	pidfile := filepath.Join(t.TempDir(), "pid")
	// The leader exits at once; its background child keeps stdout open.
	task := f.enqueue(0, map[string]string{"PIDFILE": pidfile}, sh(`sleep 300 & echo $! > "$PIDFILE"; echo bye`)...)
	leftover := proctest.PidFromFile(t, pidfile)
	c := f.waitCompletion(task.AttemptID, 5*time.Second)
	assert.Equal(t, state.OutcomeSuccess, c.Outcome, "the outcome is the leader's")
	assert.Eventually(t, func() bool { return proctest.Gone(leftover) }, 3*time.Second, 20*time.Millisecond)
	lines := f.lines(task.AttemptID)
	assert.True(t, containsLine(lines, "stdout", "bye"))
	var system []string
	for _, l := range lines {
		if l.Stream == protocol.StreamSystem {
			system = append(system, l.Line)
		}
	}
	// The supervisor kills the leftover as soon as the leader exits, so
	// the pipes close and no output is cut off by the pipe wait.
	require.Len(t, system, 1, "the leftover kill is noted: %q", system)
	assert.Contains(t, system[0], "killing the processes it left in group")
}

func TestStopOrderKillsGroupWithoutCompletion(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	a := startAgent(t, []string{srv.URL}, nil)
	pidfile := filepath.Join(t.TempDir(), "pid")
	task := f.enqueue(0, map[string]string{"PIDFILE": pidfile}, sh(`sleep 300 & echo $! > "$PIDFILE"; wait`)...)
	grandchild := proctest.PidFromFile(t, pidfile)
	require.Eventually(t, func() bool { return f.isStarted(task.AttemptID) }, 5*time.Second, 10*time.Millisecond)

	f.mu.Lock()
	f.stop[task.AttemptID] = state.StopReaped
	f.mu.Unlock()

	assert.Eventually(t, func() bool { return proctest.Gone(grandchild) }, 3*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return a.inFlightCount() == 0 }, 3*time.Second, 10*time.Millisecond)
	// The attempt left a.attempts in the same critical section that
	// decided its completion: one to send is in flight (reporting) or
	// buffered until it is delivered, and counted by the fake once sent.
	// Read in that order, no interleaving hides a completion.
	assert.False(t, a.completionPending(task.AttemptID), "no completion in flight or buffered after a stop order")
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Zero(t, f.completeHit[task.AttemptID], "no completion after a stop order")
}

// A cancel's stop order is the one whose attempt is still reported: its
// completion, sent once the attempt's whole process group is gone, is
// when the cancelled TI and its run ended (docs/design.md §4 cancel).
func TestCancelStopOrderReportsTheEndOnceTheGroupIsGone(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	pidfile := filepath.Join(t.TempDir(), "pid")
	// The child takes half a second to die after SIGTERM; the shell
	// leading the group exits at once.
	task := f.enqueue(0, map[string]string{"PIDFILE": pidfile},
		sh(`sh -c 'trap "sleep 0.5; exit 0" TERM; while :; do sleep 0.05; done' & echo $! > "$PIDFILE"; wait`)...)
	grandchild := proctest.PidFromFile(t, pidfile)
	require.Eventually(t, func() bool { return f.isStarted(task.AttemptID) }, 5*time.Second, 10*time.Millisecond)

	f.mu.Lock()
	f.stop[task.AttemptID] = state.StopCancelled
	f.mu.Unlock()

	c := f.waitCompletion(task.AttemptID, 5*time.Second)
	assert.True(t, proctest.Gone(grandchild), "the completion waited until the attempt's last process ended")
	assert.Equal(t, state.OutcomeFailed, c.Outcome)
	assert.Contains(t, c.Error, "SIGTERM")
}

// completionPending reports whether a completion of attempt id is in
// flight (the slot still reporting) or buffered for replay: the only two
// places from which one can still be sent.
func (a *Agent) completionPending(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.reporting[id]; ok {
		return true
	}
	for pc := range a.events.All() {
		if pc.req.AttemptID == id {
			return true
		}
	}
	return false
}

func TestStaleCompletionIsDropped(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	a := startAgent(t, []string{srv.URL}, nil)
	first := f.enqueue(0, nil, "true")
	f.mu.Lock()
	f.stale[first.AttemptID] = true
	f.mu.Unlock()
	second := f.enqueue(0, nil, "true")
	f.waitCompletion(second.AttemptID, 5*time.Second)
	// Once the attempt has ended and its refused completion is neither in
	// flight nor buffered, it was sent and can never be sent again: only
	// those two places send. (Its leaving a.attempts and entering the
	// in-flight set are one critical section, runAttempt.)
	require.Eventually(t, func() bool {
		a.mu.Lock()
		_, running := a.attempts[first.AttemptID]
		a.mu.Unlock()
		return !running && !a.completionPending(first.AttemptID)
	}, 5*time.Second, 10*time.Millisecond)
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, 1, f.completeHit[first.AttemptID], "a 409 stale_attempt is not retried")
}

func TestForgottenAgentReregistersAndTerminates(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	dir := t.TempDir()
	pidfile, gate := filepath.Join(dir, "pid"), filepath.Join(dir, "gate")
	doomed := f.enqueue(0, map[string]string{"PIDFILE": pidfile}, sh(`sleep 300 & echo $! > "$PIDFILE"; wait`)...)
	keeper := f.enqueue(0, map[string]string{"GATE": gate},
		sh(`while [ ! -e "$GATE" ]; do sleep 0.02; done; echo kept`)...)
	grandchild := proctest.PidFromFile(t, pidfile)
	require.Eventually(t, func() bool { return f.isStarted(doomed.AttemptID) && f.isStarted(keeper.AttemptID) },
		5*time.Second, 10*time.Millisecond)

	f.mu.Lock()
	clear(f.agents) // the server forgot the agent: 404 not_found
	f.terminate[doomed.AttemptID] = state.StopReaped
	f.mu.Unlock()

	assert.Eventually(t, func() bool { return proctest.Gone(grandchild) }, 3*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return len(f.registrations()) >= 2 }, 3*time.Second, 10*time.Millisecond)
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	c := f.waitCompletion(keeper.AttemptID, 5*time.Second)
	assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	regs := f.registrations()
	assert.ElementsMatch(t, []protocol.HeartbeatEntry{{Attempt: doomed.Attempt, Started: true}, {Attempt: keeper.Attempt, Started: true}},
		regs[1].InFlight, "both processes had started, and the re-register says so")
	_, got := f.completion(doomed.AttemptID)
	assert.False(t, got, "no completion for a terminated attempt")
	for _, l := range f.lines(keeper.AttemptID) {
		assert.NotEqual(t, protocol.StreamSystem, l.Stream, "no gap marker without an outage")
	}
}

// TestACompletionDoesNotWaitForAStartReportBehindAHeartbeat: while a
// heartbeat is held in flight (so no start report can be built), a task
// starts and exits. Its completion reaches the server at once, reporting
// the start itself (the server records it, store's
// TestACompletionReportsAStartItsAgentWaived), rather than after a start
// report queued behind the held heartbeat: before, the completion waited
// for that report, so it could not arrive until the hold ended.
func TestACompletionDoesNotWaitForAStartReportBehindAHeartbeat(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	require.Eventually(t, func() bool { // the link is up: the replay's heartbeat, then the loop's
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.heartbeats) >= 2
	}, 5*time.Second, 5*time.Millisecond)
	hold := make(chan struct{})
	defer close(hold)
	f.mu.Lock()
	f.holdHeartbeat = hold
	f.mu.Unlock()
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.heldHeartbeats > 0
	}, 5*time.Second, 5*time.Millisecond, "a periodic heartbeat in flight")

	task := f.enqueue(0, nil, "true")
	c := f.waitCompletion(task.AttemptID, 3*time.Second) // within the agent's 5 s request timeout
	assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	assert.False(t, f.isStarted(task.AttemptID), "no heartbeat reported the start: the completion does")
}

package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vigil-sched/vigil/agent/supervisor"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// killCause is why the agent killed a process group.
type killCause int

const (
	causeNone    killCause = iota
	causeTimeout           // execution_timeout exceeded (docs/design.md §7)
	causeStop              // stop order from the control plane (docs/design.md §4)
	causeDrain             // drain deadline at shutdown
)

// attempt is one claimed task instance on this agent.
type attempt struct {
	task protocol.ClaimedTask
	log  *slog.Logger
	// mask hides the task's secret values in its log lines (mask.go);
	// nil when the claim delivered none.
	mask *strings.Replacer

	// Guarded by Agent.mu.
	seq      int64 // last Seq assigned
	started  bool
	startGen uint64 // Agent.startGen at the start, see heartbeat
	// startSent: a heartbeat listing the attempt as started was built
	// (see heartbeat). startWaived: the process exited before one was,
	// so the completion reports the start (waiveStartReport).
	startSent, startWaived bool

	mu         sync.Mutex
	pgid       int // 0 until started
	exited     bool
	cause      killCause // the first kill's cause
	stopped    bool      // the control plane ordered a stop: no completion unless it exited 0 on its own
	stopReason string
	killing    bool // a group killer is running
}

// result is how an attempt ended.
type result struct {
	req      protocol.CompleteRequest
	suppress bool   // send no completion
	why      string // why it was suppressed
	pgid     int
	dur      time.Duration
}

// launch records a claimed task and runs it in its own goroutine.
func (a *Agent) launch(ctx context.Context, t protocol.ClaimedTask) {
	att := &attempt{task: t, mask: newMasker(t.Secrets), log: a.log.With("ti_id", t.TIID, "attempt_id", t.AttemptID, "run_id", t.RunID,
		"dag_id", t.DAGID, "task_id", t.TaskID, "try_number", t.TryNumber)}
	a.mu.Lock()
	if _, dup := a.attempts[t.AttemptID]; dup {
		a.mu.Unlock()
		att.log.Warn("claimed an attempt that is already running; ignored")
		return
	}
	a.attempts[t.AttemptID] = att
	a.reserveMarkerLocked(att) // claimed during an outage: its marker is Seq 1
	a.mu.Unlock()
	att.log.Debug("claimed", "execution_timeout", t.ExecutionTimeout.D())
	att.log.Debug("claimed command", "command", oneLine(t.Command, maxLoggedCommand))
	a.tasks.Go(func() { a.runAttempt(ctx, att) })
}

// runAttempt runs att to the end and reports its completion.
func (a *Agent) runAttempt(ctx context.Context, att *attempt) {
	res := a.execute(ctx, att)
	a.mu.Lock()
	delete(a.attempts, att.task.AttemptID)
	logEnd := a.logs.End() // past the attempt's last line
	if !res.suppress {
		// The slot stays taken until the server has the completion
		// (delivered, or buffered while the link is down): claimed
		// earlier, the server would still count the TI as running and
		// hand out nothing (docs/design.md §4 claim).
		a.reporting[att.task.AttemptID] = protocol.HeartbeatEntry{Attempt: att.task.Attempt, Started: att.started}
	}
	a.mu.Unlock()
	if res.suppress {
		signal(a.slotFreed)
		att.log.Info("attempt ended without completion", "why", res.why, "duration", res.dur)
		return
	}
	defer func() {
		a.mu.Lock()
		delete(a.reporting, att.task.AttemptID)
		a.mu.Unlock()
		signal(a.slotFreed)
	}()
	args := []any{"outcome", res.req.Outcome, "duration", res.dur}
	if res.req.ExitCode != nil {
		args = append(args, "exit_code", *res.req.ExitCode)
	}
	if res.req.Error != "" {
		args = append(args, "error", res.req.Error)
	}
	level := slog.LevelDebug // per-TI lines: the events table has them
	if res.req.Outcome != state.OutcomeSuccess {
		level = slog.LevelInfo
	}
	att.log.Log(ctx, level, "finished", args...)
	a.awaitShipped(ctx, logEnd) // let the output land before the outcome
	a.complete(ctx, pendingCompletion{req: res.req, pgid: res.pgid, log: att.log})
}

// execute starts the process under its supervisor, reports the start,
// waits for the end (or the execution timeout) and classifies the result.
func (a *Agent) execute(ctx context.Context, att *attempt) result {
	stdout := newLineSplitter(maxLineBytes, func(l string) { a.addLog(att, protocol.StreamStdout, l) })
	stderr := newLineSplitter(maxLineBytes, func(l string) { a.addLog(att, protocol.StreamStderr, l) })
	if len(att.task.Command) == 0 {
		return a.startFailed(ctx, att, errors.New("empty command"))
	}
	u, err := a.taskUserFor(att.task.RunAsUser)
	if err != nil {
		return a.startFailed(ctx, att, err)
	}
	var dir string
	if u != nil {
		if dir, err = a.workDir(u); err != nil {
			return a.startFailed(ctx, att, err)
		}
		defer a.removeWorkDir(dir, att.log)
	}
	output, err := a.outputFile(u)
	if err != nil {
		return a.startFailed(ctx, att, err)
	}
	defer removeOutputFile(output, att.log)
	outP, errP, err := newOutPipes()
	if err != nil {
		return a.startFailed(ctx, att, fmt.Errorf("output pipes: %w", err))
	}
	if !att.mayStart() {
		outP.abandon()
		errP.abandon()
		return result{suppress: true, why: "stopped before the process started"}
	}
	start := time.Now()
	sup, err := a.taskSupervisor()
	var tk *supervisor.Task
	if err == nil {
		tk, err = sup.Start(a.request(att.task, u, dir, output, outP.w, errP.w))
	}
	if err != nil {
		outP.abandon()
		errP.abandon()
		return a.startFailed(ctx, att, err)
	}
	outP.started(stdout) // the request carried the supervisor's copies
	errP.started(stderr)
	// drained reads the rest of both streams once the process has exited
	// (bounded by idle time: outPipe.drain) and reports whether all of it
	// was read.
	drained := func() bool {
		errDone := make(chan bool, 1)
		go func() { errDone <- errP.drain(a.pipeWait) }() // both within one bound
		okOut := outP.drain(a.pipeWait)
		okErr := <-errDone
		stdout.Flush()
		stderr.Flush()
		return okOut && okErr
	}
	first, ok := <-tk.Status
	if !ok || first.Kind != supervisor.KindStarted {
		drained()
		if ok && first.Kind == supervisor.KindStartFailed {
			return a.startFailed(ctx, att, errors.New(first.Text))
		}
		return a.startFailed(ctx, att, fmt.Errorf("task supervisor exited before it started the task: %w", tk.Err()))
	}
	pgid := first.N
	gen := a.markStarted(att, pgid)
	att.log.Debug("started", "pid", pgid, "supervisor_pid", sup.Pid())
	hbDone := make(chan struct{})
	go func() { defer close(hbDone); a.heartbeat(ctx, gen) }()
	end := a.wait(att, tk, pgid)
	var waitErr error
	if end == nil { // the supervisor exited before the task's last line
		waitErr = tk.Err()
		a.killOrphaned(att, pgid, waitErr)
	}
	if !drained() && waitErr == nil {
		waitErr = errOutputHeld
	}
	a.endGroup(att, pgid)
	if !a.waiveStartReport(att) {
		<-hbDone // the start is reported before the completion
	}
	res := a.outcome(att, waitErr, end)
	res.pgid, res.dur = pgid, time.Since(start)
	if !res.suppress && res.req.Outcome == state.OutcomeSuccess {
		a.collectOutputs(att, output, &res.req)
	}
	return res
}

// endGroup marks att exited and kills what is left of its process group:
// a task may not leave processes behind once its leader has exited, as
// with systemd's KillMode=control-group. Its outcome is the leader's.
func (a *Agent) endGroup(att *attempt, pgid int) {
	att.mu.Lock()
	att.exited = true
	leftover := !att.killing && syscall.Kill(-pgid, 0) == nil
	att.killing = att.killing || leftover
	att.mu.Unlock()
	if leftover {
		att.log.Warn("process exited and left processes in its group; killing them", "pgid", pgid)
		a.systemLine(att, fmt.Sprintf("--- process exited; killing the processes it left in group %d ---", pgid))
		a.goKillGroup(pgid, att.log)
	}
}

// waiveStartReport is called once att's process has exited. When no
// heartbeat listing its start has been built yet (the start report waits
// behind another heartbeat in flight), none will be: the completion
// reports the start instead, and the server records started_at with it
// (store: a completion proves the start). It returns false when a
// heartbeat carries the start, which then lands before the completion.
// A no-op task's start report was one heartbeat transaction per claim
// round in Lite (docs/performance.md); the start is not reported any
// later than the heartbeat it skips would have reported it.
func (a *Agent) waiveStartReport(att *attempt) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if att.startSent {
		return false
	}
	att.startWaived = true
	return true
}

// markStarted records the process and returns the start's number for
// heartbeat; a kill requested before the start is carried out now.
func (a *Agent) markStarted(att *attempt, pgid int) uint64 {
	a.mu.Lock()
	a.startGen++
	gen := a.startGen
	att.started, att.startGen = true, gen
	a.mu.Unlock()
	att.mu.Lock()
	att.pgid = pgid
	pending := att.cause != causeNone && !att.killing && pgid > 0
	att.killing = att.killing || pending
	att.mu.Unlock()
	if pending {
		a.goKillGroup(pgid, att.log)
	}
	return gen
}

// startFailed reports a process that could not be started: it counts as
// started (so the server records started_at) and fails start_failed with
// the error text and no exit code.
func (a *Agent) startFailed(ctx context.Context, att *attempt, err error) result {
	att.log.Error("process failed to start", "command", att.task.Command, "err", err)
	a.systemLine(att, fmt.Sprintf("--- failed to start %q: %v ---", att.task.Command, err))
	a.heartbeat(ctx, a.markStarted(att, 0))
	return result{req: protocol.CompleteRequest{
		Attempt: att.task.Attempt, Outcome: state.OutcomeFailed, Failure: state.FailureStartFailed, Error: err.Error(),
	}}
}

// wait waits for the task's last status line, enforcing the execution
// timeout on its process group pgid, and returns the leader's wait status
// as the supervisor reported it; nil when the supervisor exited first.
func (a *Agent) wait(att *attempt, tk *supervisor.Task, pgid int) *syscall.WaitStatus {
	done := make(chan *syscall.WaitStatus, 1)
	go func() { done <- a.lastStatus(att, tk, pgid) }()
	to := att.task.ExecutionTimeout.D()
	if to <= 0 {
		return <-done
	}
	timer := time.NewTimer(to)
	defer timer.Stop()
	select {
	case end := <-done:
		return end
	case <-timer.C:
	}
	if a.kill(att, causeTimeout, "") {
		att.log.Warn("execution timeout exceeded; killing process group", "execution_timeout", to, "pgid", pgid)
		a.systemLine(att, fmt.Sprintf("--- execution_timeout %s exceeded: killing process group %d (SIGTERM, SIGKILL after %s) ---",
			to, pgid, a.cfg.KillGrace))
	}
	return <-done
}

// lastStatus reads the task's status lines after started until its
// channel closes, noting a leftover group, and returns the leader's wait
// status; nil if the supervisor exited before reporting it.
func (a *Agent) lastStatus(att *attempt, tk *supervisor.Task, pgid int) *syscall.WaitStatus {
	var end *syscall.WaitStatus
	for m := range tk.Status {
		switch m.Kind {
		case supervisor.KindExited:
			ws := syscall.WaitStatus(m.N << 8)
			end = &ws
		case supervisor.KindSignaled:
			ws := syscall.WaitStatus(m.N & 0x7f)
			end = &ws
		case supervisor.KindLeftover:
			att.mu.Lock()
			ours := att.killing // Vigil is killing the group: its own line says why
			att.mu.Unlock()
			if !ours {
				att.log.Warn("process exited and left processes in its group; the supervisor killed them", "pgid", pgid)
				a.systemLine(att, fmt.Sprintf("--- process exited; killing the processes it left in group %d ---", pgid))
			}
		}
	}
	return end
}

// killOrphaned kills the task's process group pgid after its supervisor
// exited before the task (killed, say): the task lost its subreaper and
// the link that kills it with the agent, and the agent cannot learn its
// status. The group is killed before the attempt is reported, so its
// retry never runs beside it.
func (a *Agent) killOrphaned(att *attempt, pgid int, err error) {
	att.mu.Lock()
	alive := syscall.Kill(-pgid, 0) == nil
	att.killing = att.killing || alive
	att.mu.Unlock()
	if !alive {
		return
	}
	att.log.Warn("task supervisor exited before the task; killing its process group", "pgid", pgid, "err", err)
	a.systemLine(att, fmt.Sprintf("--- the task's supervisor is gone (%v): killing process group %d ---", err, pgid))
	supervisor.KillGroup(pgid, a.cfg.KillGrace, att.log)
}

// outcome maps how the process ended to a completion (docs/design.md §4
// complete). end is the task leader's wait status as its supervisor
// reported it; nil when the supervisor ended without reporting one, and
// then waitErr, the supervisor's own end, is all there is.
func (a *Agent) outcome(att *attempt, waitErr error, end *syscall.WaitStatus) result {
	att.mu.Lock()
	cause, stopped, reason := att.cause, att.stopped, att.stopReason
	att.mu.Unlock()
	req := protocol.CompleteRequest{Attempt: att.task.Attempt, Outcome: state.OutcomeFailed}
	if errors.Is(waitErr, errOutputHeld) {
		att.log.Warn("process exited but a descendant still holds its output open; stopped reading")
		a.systemLine(att, "--- process exited; a descendant still holds stdout/stderr open, output after this point is not captured ---")
		waitErr = nil
	}
	exitedZero := end != nil && end.Exited() && end.ExitStatus() == 0
	if stopped && !exitedZero && reason != string(state.StopCancelled) {
		return result{suppress: true, why: "control plane stop order: " + reason}
	}
	// A cancel's stop order is the exception: its completion tells the
	// control plane when the attempt's last process ended, which becomes
	// the cancelled TI's and its run's end time; it changes no state
	// (docs/design.md §4 cancel).
	switch {
	case stopped && exitedZero:
		// It finished on its own, before the stop order's kill could land
		// (the agent had not yet seen it exit): its success is reported,
		// and the control plane judges it (a reaped attempt's success is
		// accepted or recorded late, adr/0014).
		att.log.Info("process exited 0 before the stop order took effect; reporting its success", "reason", reason)
		code := 0
		req.Outcome, req.ExitCode = state.OutcomeSuccess, &code
	case cause == causeTimeout:
		req.Outcome = state.OutcomeExecutionTimeout
		req.Error = fmt.Sprintf("execution_timeout %s exceeded: process group killed", att.task.ExecutionTimeout.D())
	case cause == causeDrain:
		req.Failure = state.FailureAgentShutdown
		req.Error = fmt.Sprintf("killed: agent shut down and its drain timeout %s expired", a.cfg.DrainTimeout)
	case end != nil && end.Signaled():
		// Not a signal of Vigil's, each of which has its cause above, but
		// a cancel's.
		req.Failure, req.Signal = state.FailureSignal, signalName(end.Signal())
		req.Error = "killed by signal " + req.Signal
	case end != nil && end.ExitStatus() == 0:
		code := 0
		req.Outcome, req.ExitCode = state.OutcomeSuccess, &code
	case end != nil:
		code := end.ExitStatus()
		req.ExitCode, req.Error = &code, fmt.Sprintf("exit status %d", code)
	case waitErr == nil:
		req.Error = "task supervisor exited without reporting the task's status"
	default:
		req.Error = "task supervisor: " + waitErr.Error()
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				req.Failure, req.Signal = state.FailureSignal, signalName(ws.Signal())
				req.Error = "task supervisor killed by signal " + req.Signal + "; the task's own status is unknown"
			}
		}
	}
	return result{req: req}
}

// signalName is the conventional name of sig ("SIGKILL"), or
// "SIG<number>" for one without a name.
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n
	}
	return fmt.Sprintf("SIG%d", int(sig))
}

// maxLoggedCommand bounds the command a claim logs, in characters.
const maxLoggedCommand = 200

// oneLine is argv as one log-friendly line: arguments joined by spaces,
// line breaks and tabs shown as \n and \t, cut to max characters with "…".
func oneLine(argv []string, max int) string {
	s := strings.NewReplacer("\r", `\r`, "\n", `\n`, "\t", `\t`).Replace(strings.Join(argv, " "))
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

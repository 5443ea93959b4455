package agent

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"syscall"

	"github.com/vigil-sched/vigil/agent/supervisor"
	"github.com/vigil-sched/vigil/api/protocol"
)

// command builds the task's process: the supervisor (package
// agent/supervisor) running the task's command in its own process group
// (so kills reach every descendant, and the group dies with the agent),
// with the environment taskEnv builds: the allowed part of the agent's
// environment, the task's env, then the VIGIL_* identity variables, which
// the task env cannot override. The supervisor gets its own group too, so
// a terminal's signals to the agent's group do not reach it. statusW is
// the write end of the status pipe, the supervisor's descriptor 3: the
// caller closes it once the process has started, and reads statusR with
// supervisor.ReadStatus. With a task user u the supervisor starts the
// task as u in dir.
func (a *Agent) command(t protocol.ClaimedTask, u *taskUser, dir, output string, stdout, stderr *os.File) (cmd *exec.Cmd, statusR, statusW *os.File, err error) {
	statusR, statusW, err = os.Pipe()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("status pipe for the task supervisor: %w", err)
	}
	var as *supervisor.Identity
	var userEnv map[string]string
	if u != nil {
		as, userEnv = u.identity(dir), u.userEnv()
	}
	args := append(slices.Clip(a.cfg.SupervisorArgs), supervisor.Args(os.Getpid(), a.cfg.KillGrace, as, t.Command)...)
	cmd = exec.Command(a.cfg.SupervisorPath, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = taskEnv(a.cfg.TaskEnvAllow, os.Environ(), userEnv, t, output)
	cmd.ExtraFiles = []*os.File{statusW}
	// The agent's own pipes (outPipe), so Wait returns when the process
	// exits and the agent bounds the drain by idle time itself.
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd, statusR, statusW, nil
}

// mayStart reports whether no kill or stop was requested before the start.
func (t *attempt) mayStart() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cause == causeNone && !t.stopped
}

// kill requests that att's process group be killed for cause and reports
// whether the request is new: the first kill of a live attempt, or the
// first stop order. Before the start, the runner honours it instead.
func (a *Agent) kill(att *attempt, cause killCause, reason string) bool {
	att.mu.Lock()
	if att.exited {
		att.mu.Unlock()
		return false
	}
	fresh := att.cause == causeNone
	if fresh {
		att.cause = cause
	}
	if cause == causeStop {
		fresh = !att.stopped
		att.stopped, att.stopReason = true, reason
	}
	pgid := att.pgid
	start := pgid > 0 && !att.killing
	att.killing = att.killing || start
	att.mu.Unlock()
	if start {
		a.goKillGroup(pgid, att.log)
	}
	return fresh
}

// goKillGroup runs supervisor.KillGroup in the background; Run waits
// for it.
func (a *Agent) goKillGroup(pgid int, log *slog.Logger) {
	a.bg.Go(func() { supervisor.KillGroup(pgid, a.cfg.KillGrace, log) })
}

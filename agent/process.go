package agent

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
)

// command builds the task's process: the supervisor (Supervise) running
// the task's command in its own process group (so kills reach every
// descendant, and the group dies with the agent), with the environment
// taskEnv builds: the allowed part of the agent's environment, the task's
// env, then the VIGIL_* identity variables, which the task env cannot
// override. The supervisor gets its own group too, so a terminal's
// signals to the agent's group do not reach it. statusW is the write end
// of the status pipe, the supervisor's descriptor 3: the caller closes it
// once the process has started, and reads statusR with readSupervisor.
func (a *Agent) command(t protocol.ClaimedTask, stdout, stderr io.Writer) (cmd *exec.Cmd, statusR, statusW *os.File, err error) {
	statusR, statusW, err = os.Pipe()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("status pipe for the task supervisor: %w", err)
	}
	args := []string{SupervisorCommand, "--parent-pid", strconv.Itoa(os.Getpid()),
		"--kill-grace", a.cfg.KillGrace.String(), "--"}
	cmd = exec.Command(a.cfg.SupervisorPath, append(args, t.Command...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = taskEnv(a.cfg.TaskEnvAllow, os.Environ(), t)
	cmd.ExtraFiles = []*os.File{statusW}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A descendant that keeps the pipes open must not hang Wait.
	cmd.WaitDelay = a.pipeWait
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

// goKillGroup runs killGroup in the background; Run waits for it.
func (a *Agent) goKillGroup(pgid int, log *slog.Logger) {
	a.bg.Go(func() { killGroup(pgid, a.cfg.KillGrace, log) })
}

// killGroup sends SIGTERM to the process group pgid, then SIGKILL once
// grace has passed if any member is left. A group whose members are all
// zombies still counts as present; SIGKILL is then harmless.
func killGroup(pgid int, grace time.Duration, log *slog.Logger) {
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil {
		if !errors.Is(err, syscall.ESRCH) {
			log.Warn("SIGTERM to process group failed", "pgid", pgid, "err", err)
		}
		return
	}
	log.Info("sent SIGTERM to process group", "pgid", pgid, "kill_grace", grace)
	deadline := time.Now().Add(grace)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		time.Sleep(min(left, 50*time.Millisecond))
		if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
			log.Info("process group gone", "pgid", pgid)
			return
		}
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err == nil {
		log.Warn("process group still present after grace; sent SIGKILL", "pgid", pgid, "kill_grace", grace)
	}
}

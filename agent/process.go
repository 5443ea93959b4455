package agent

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
)

// command builds the task's process: its own process group (so kills reach
// every descendant) and the environment taskEnv builds: the allowed part
// of the agent's environment, the task's env, then the VIGIL_* identity
// variables, which the task env cannot override.
func (a *Agent) command(t protocol.ClaimedTask, stdout, stderr io.Writer) *exec.Cmd {
	cmd := exec.Command(t.Command[0], t.Command[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	env := taskEnv(a.cfg.TaskEnvAllow, os.Environ(), t)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A descendant that keeps the pipes open must not hang Wait.
	cmd.WaitDelay = a.pipeWait
	return cmd
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

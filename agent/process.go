package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/vigil-sched/vigil/agent/supervisor"
	"github.com/vigil-sched/vigil/api/protocol"
)

// request builds the task's start request for the agent's supervisor
// (package agent/supervisor), which runs the task's command in its own
// process group (so kills reach every descendant, and the group dies with
// the agent), with the environment taskEnv builds: the allowed part of the
// agent's environment, the task's env, then the VIGIL_* identity
// variables, which the task env cannot override. stdout and stderr are
// the task's ends of the agent's output pipes. With a task user u the
// supervisor starts the task as u in dir.
func (a *Agent) request(t protocol.ClaimedTask, u *taskUser, dir, output string, stdout, stderr *os.File) supervisor.Request {
	var as *supervisor.Identity
	var userEnv map[string]string
	if u != nil {
		as, userEnv = u.identity(dir), u.userEnv()
	}
	return supervisor.Request{Argv: t.Command, Env: taskEnv(a.cfg.TaskEnvAllow, os.Environ(), userEnv, t, output), As: as,
		Stdout: stdout, Stderr: stderr}
}

// supervisor returns the agent's task supervisor, starting one when there
// is none or the last one exited (adr/0035-one-supervisor-per-agent.md).
func (a *Agent) taskSupervisor() (*supervisor.Client, error) {
	a.supMu.Lock()
	defer a.supMu.Unlock()
	if a.sup != nil {
		select {
		case <-a.sup.Done():
			a.log.Warn("task supervisor exited; starting another", "err", a.sup.Err())
			a.sup = nil
		default:
			return a.sup, nil
		}
	}
	if a.supClosed {
		return nil, errors.New("the agent is stopping: no task supervisor")
	}
	c, err := supervisor.StartClient(a.cfg.SupervisorPath, a.cfg.SupervisorArgs, a.cfg.KillGrace)
	if err != nil {
		return nil, fmt.Errorf("task supervisor %s: %w", a.cfg.SupervisorPath, err)
	}
	a.log.Info("task supervisor started", "pid", c.Pid())
	a.sup = c
	return c, nil
}

// closeSupervisor stops the agent's supervisor, once its tasks are done:
// it kills what is left of their groups and exits.
func (a *Agent) closeSupervisor() {
	a.supMu.Lock()
	c := a.sup
	a.sup, a.supClosed = nil, true
	a.supMu.Unlock()
	if c != nil {
		c.Close()
	}
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

// Package supervisor is the program the tasks of an agent run under
// (package agent, "Process groups and the supervisor"): one long-lived
// process per agent that starts each task in its own process group,
// reports the task's exact wait status, and kills every task's group when
// the agent dies, even by SIGKILL.
//
// An agent starts it once and sends it start requests over a Unix socket
// (Client). A task start therefore costs a fork and exec of the task,
// not also the start of a supervisor program
// (adr/0035-one-supervisor-per-agent.md; before it, one supervisor per
// task, adr/0026-small-supervisor-program.md). It imports only the
// standard library and golang.org/x/sys/unix, so that cmd/vigil-supervise
// stays a small binary; the vigil binary's hidden `vigil __supervise` runs
// the same Run. Both sides of the protocol live here.
package supervisor

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	ossignal "os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Subcommand is the hidden subcommand of the vigil binary that runs Run,
// for when no ProgramName binary is installed beside it. The agent starts
//
//	vigil-supervise    --parent-pid <agent pid> --kill-grace <d>
//	vigil __supervise  --parent-pid <agent pid> --kill-grace <d>
//
// (Args builds the part from --parent-pid on) with its end of a Unix
// stream socket as descriptor ConnFD, on which it sends start requests
// and reads status lines (Kind).
const Subcommand = "__supervise"

// ProgramName is the small supervisor binary's file name
// (cmd/vigil-supervise); the agent looks for it beside its own executable.
const ProgramName = "vigil-supervise"

// ConnFD is the supervisor's descriptor of its connection to the agent.
const ConnFD = 3

// parentPollInterval is how often the supervisor checks that its agent is
// still its parent, behind the connection's end of file.
const parentPollInterval = 200 * time.Millisecond

// Exit codes of the supervisor itself.
const (
	// ExitFailed: the supervisor failed (bad arguments), or the agent
	// died and the supervisor killed its tasks.
	ExitFailed = 125
	// ExitStopped: a SIGTERM, SIGINT, SIGHUP or SIGQUIT stopped the
	// supervisor; it killed every task's group and reported each status.
	ExitStopped = 143
)

// defaultKillGrace applies when --kill-grace is absent; the agent always
// passes its Config.KillGrace.
const defaultKillGrace = 10 * time.Second

// Run is the supervisor's body, `vigil-supervise ARGS` and `vigil
// __supervise ARGS`; args are those after the program (and subcommand)
// name, and it returns the process's exit code. It exists so that every
// task's process tree dies with its agent, even when the agent is killed
// with SIGKILL, while a task start costs only the task's own fork and
// exec:
//
//   - It reads start requests from the agent on ConnFD until end of file.
//     The agent's end is close-on-exec and held by the agent alone, so
//     end of file means the agent has closed it or is dead, whatever
//     killed it. As a backstop it also checks every parentPollInterval
//     that getppid() still is --parent-pid.
//   - It starts each task in its own process group, and it is a child
//     subreaper, so descendants orphaned inside a task are reparented to
//     it and reaped at once (a zombie would keep the group "alive").
//   - When the agent is gone, it kills every task's group: SIGTERM, then
//     SIGKILL once --kill-grace has passed, and exits.
//   - When a task's leader ends, it kills whatever the leader left in its
//     group (SIGTERM, SIGKILL after the grace), then reports the leader's
//     exact wait status.
//   - A SIGTERM, SIGINT, SIGHUP or SIGQUIT stops it: it kills every
//     task's group as above, reports each task's status, and exits with
//     ExitStopped. (A signal is not forwarded: it would be ambiguous
//     among the tasks; signal a task's process group instead.)
//   - A request with an Identity starts the task as that user: the child
//     sets its supplementary groups, then its gid, then its uid before it
//     execs, in Identity.Dir. The supervisor itself keeps the agent's
//     user (root), so the task can neither signal nor trace it, and it
//     can still kill the task's group.
//
// If the supervisor itself is killed, its tasks lose their subreaper and
// their link to the agent: the agent sees its connection end, reports
// each running task failed with the supervisor's signal, and kills the
// task's group itself before it reports it (package agent).
func Run(args []string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "task supervisor: "+err.Error())
		return ExitFailed
	}
	opts, err := parseArgs(args)
	if err != nil {
		return fail(err)
	}
	syscall.CloseOnExec(ConnFD) // the tasks must not hold the connection
	// Before the first fork: no exit may go unnoticed.
	chld := make(chan os.Signal, 1)
	ossignal.Notify(chld, syscall.SIGCHLD)
	stop := make(chan os.Signal, 4)
	ossignal.Notify(stop, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("PR_SET_CHILD_SUBREAPER: %w", err))
	}
	parentGone := func() bool { return os.Getppid() != opts.parent }
	if parentGone() {
		return fail(fmt.Errorf("agent (pid %d) exited before the supervisor started", opts.parent))
	}
	s, err := newServer(ConnFD, opts.grace)
	if err != nil {
		return fail(err)
	}
	go s.reap(chld)
	eof := make(chan struct{})
	go func() { defer close(eof); s.serve() }()
	tick := time.NewTicker(parentPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-eof:
			s.killAll()
			if parentGone() {
				return ExitFailed
			}
			return 0
		case <-stop:
			s.killAll()
			s.awaitEnds()
			return ExitStopped
		case <-tick.C:
			if parentGone() {
				s.killAll()
				return ExitFailed
			}
		}
	}
}

// options are the supervisor's parsed arguments.
type options struct {
	parent int
	grace  time.Duration
}

// parseArgs reads --parent-pid and --kill-grace; each error names the
// flag and the rule.
func parseArgs(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet(ProgramName, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.parent, "parent-pid", 0, "pid of the agent; its death kills the tasks")
	fs.DurationVar(&o.grace, "kill-grace", defaultKillGrace, "SIGTERM to SIGKILL delay")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.parent <= 0:
		return o, fmt.Errorf("--parent-pid: must be a pid greater than 0, got %d", o.parent)
	case o.grace < 0:
		return o, fmt.Errorf("--kill-grace: must not be negative, got %s", o.grace)
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected argument %q: the supervisor takes its tasks from the agent on descriptor %d, not on its command line",
			fs.Arg(0), ConnFD)
	}
	return o, nil
}

// KillGroup sends SIGTERM to the process group pgid, then SIGKILL once
// grace has passed if any member is left, logging each step to log. A
// group whose members are all zombies still counts as present; SIGKILL is
// then harmless. It returns once the group is gone or SIGKILL was sent.
// The supervisor and the agent (for timeouts, stop orders, the drain)
// kill a task's group the same way.
func KillGroup(pgid int, grace time.Duration, log *slog.Logger) {
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

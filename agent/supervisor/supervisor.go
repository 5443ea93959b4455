// Package supervisor is the program every task of an agent runs under
// (package agent, "Process groups and the supervisor"): it starts the
// task in its own process group, reports the task's exact wait status on
// a status pipe, and kills the group when the agent dies, even by
// SIGKILL.
//
// It starts once per task instance, so its start-up cost bounds how many
// tasks an agent can start a second (docs/performance.md, "What bounds
// Lite"). It therefore imports only the standard library and
// golang.org/x/sys/unix: cmd/vigil-supervise, a small binary, runs it,
// and so does the vigil binary's hidden `vigil __supervise`, without the
// package initialisation of everything else vigil links in
// (adr/0026-small-supervisor-program.md). Both sides of the status pipe's
// protocol live here.
package supervisor

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	ossignal "os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Subcommand is the hidden subcommand of the vigil binary that runs Run,
// for when no ProgramName binary is installed beside it. The agent starts
//
//	vigil-supervise    --parent-pid <agent pid> --kill-grace <d> [identity] -- <command...>
//	vigil __supervise  --parent-pid <agent pid> --kill-grace <d> [identity] -- <command...>
//
// where identity, for a task that runs as another OS user (Identity), is
// --uid U --gid G [--groups G1,G2...] --dir D
// (Args builds the part from --parent-pid on) with the task's
// environment, stdout and stderr, and the status pipe as descriptor
// StatusFD.
const Subcommand = "__supervise"

// ProgramName is the small supervisor binary's file name
// (cmd/vigil-supervise); the agent looks for it beside its own executable.
const ProgramName = "vigil-supervise"

// StatusFD is the supervisor's descriptor of the status pipe's write end.
const StatusFD = 3

// parentPollInterval is how often the supervisor checks that its agent is
// still its parent, behind the parent-death signal.
const parentPollInterval = 200 * time.Millisecond

// Exit codes of the supervisor itself, for when it cannot report the
// task's own (as `env` and container runtimes do). Otherwise it exits
// with the task's code, or 128 + the signal number.
const (
	// ExitFailed: the supervisor failed (bad arguments, the agent died).
	ExitFailed = 125
	// ExitNoExec: the task could not be started.
	ExitNoExec = 127
)

// defaultKillGrace applies when --kill-grace is absent; the agent always
// passes its Config.KillGrace.
const defaultKillGrace = 10 * time.Second

// Run is the supervisor's body, `vigil-supervise ARGS` and `vigil
// __supervise ARGS`; args are those after the program (and subcommand)
// name, and it returns the process's exit code. It exists so that a
// task's process tree dies with its agent, even when the agent is killed
// with SIGKILL:
//
//   - It asks the kernel for SIGTERM when its parent dies
//     (PR_SET_PDEATHSIG). The kernel ties that signal to the parent
//     *thread* that forked the supervisor, not to the agent process: a Go
//     runtime thread that exits (a goroutine that ends while locked to its
//     thread) would fire it early. So the signal only prompts a check,
//     and the check is whether getppid() still is --parent-pid; the same
//     check also runs every parentPollInterval, which covers a signal
//     spent on such a thread and an agent that died before the prctl.
//   - It starts the task in its own process group and becomes a child
//     subreaper, so descendants orphaned inside the task are reparented
//     to it and reaped at once (a zombie would keep the group "alive").
//   - When the agent is gone, it kills the task's group: SIGTERM, then
//     SIGKILL once --kill-grace has passed, and exits.
//   - Other SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 it
//     forwards to the task's group, so it is transparent to operators.
//   - When the task's leader ends, it reports the exact wait status on the
//     status pipe, kills whatever the leader left in its group (SIGTERM,
//     SIGKILL after the grace) and exits with the leader's code, or 128 +
//     the signal number.
//   - With an Identity it starts the task as that user: the child sets its
//     supplementary groups, then its gid, then its uid before it execs
//     (SysProcAttr.Credential), in Identity.Dir. The supervisor itself
//     keeps the agent's user (root), so the task can neither signal nor
//     trace it, and it can still kill the task's group.
//
// The task inherits stdin, stdout, stderr and the environment; never the
// status pipe. After the start the supervisor writes nothing to stdout or
// stderr: the agent holding their other ends may be dead.
func Run(args []string) int {
	status := os.NewFile(StatusFD, "vigil-supervisor-status")
	report := func(kind Kind, detail string) {
		if status != nil {
			_, _ = fmt.Fprintf(status, "%s %s\n", kind, strings.ReplaceAll(detail, "\n", " "))
		}
	}
	if status != nil {
		syscall.CloseOnExec(StatusFD) // the task must not hold the pipe open
	}
	fail := func(err error) int {
		msg := "task supervisor: " + err.Error()
		fmt.Fprintln(os.Stderr, msg)
		report(KindStartFailed, msg)
		return ExitFailed
	}
	opts, err := parseArgs(args)
	if err != nil {
		return fail(err)
	}
	parent, grace, argv := opts.parent, opts.grace, opts.argv
	sigs := make(chan os.Signal, 16)
	ossignal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
		return fail(fmt.Errorf("PR_SET_PDEATHSIG: %w", err))
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("PR_SET_CHILD_SUBREAPER: %w", err))
	}
	parentGone := func() bool { return os.Getppid() != parent }
	if parentGone() {
		return fail(fmt.Errorf("agent (pid %d) exited before the task started", parent))
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if as := opts.as; as != nil {
		if os.Geteuid() != 0 {
			return fail(fmt.Errorf("--uid %d: switching to another user needs root; the supervisor runs as uid %d", as.UID, os.Geteuid()))
		}
		groups := make([]uint32, len(as.Groups))
		for i, g := range as.Groups {
			groups[i] = uint32(g)
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(as.UID), Gid: uint32(as.GID), Groups: groups}
		cmd.Dir = as.Dir
	}
	if err := cmd.Start(); err != nil {
		report(KindStartFailed, err.Error())
		return ExitNoExec
	}
	pid := cmd.Process.Pid
	report(KindStarted, strconv.Itoa(pid))
	leader := make(chan syscall.WaitStatus, 1)
	go reapChildren(pid, leader)
	quiet := slog.New(slog.DiscardHandler)
	tick := time.NewTicker(parentPollInterval)
	defer tick.Stop()
	for {
		select {
		case ws := <-leader:
			code := ws.ExitStatus()
			if ws.Signaled() {
				report(KindSignaled, strconv.Itoa(int(ws.Signal())))
				code = 128 + int(ws.Signal())
			} else {
				report(KindExited, strconv.Itoa(code))
			}
			if syscall.Kill(-pid, 0) == nil {
				report(KindLeftover, strconv.Itoa(pid))
				KillGroup(pid, grace, quiet)
			}
			return code
		case sig := <-sigs:
			if parentGone() {
				KillGroup(pid, grace, quiet)
				return ExitFailed
			}
			_ = syscall.Kill(-pid, sig.(syscall.Signal))
		case <-tick.C:
			if parentGone() {
				KillGroup(pid, grace, quiet)
				return ExitFailed
			}
		}
	}
}

// options are the supervisor's parsed arguments.
type options struct {
	parent int
	grace  time.Duration
	as     *Identity // nil: the task keeps the supervisor's user
	argv   []string
}

// parseArgs reads --parent-pid, --kill-grace, the identity flags and the
// command after --; each error names the flag and the rule.
func parseArgs(args []string) (options, error) {
	var o options
	var uid, gid int
	var groups, dir string
	fs := flag.NewFlagSet(ProgramName, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.parent, "parent-pid", 0, "pid of the agent; its death kills the task")
	fs.DurationVar(&o.grace, "kill-grace", defaultKillGrace, "SIGTERM to SIGKILL delay")
	fs.IntVar(&uid, "uid", -1, "run the task as this uid")
	fs.IntVar(&gid, "gid", -1, "and this primary gid")
	fs.StringVar(&groups, "groups", "", "and these supplementary gids, comma-separated")
	fs.StringVar(&dir, "dir", "", "in this working directory")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.argv = fs.Args()
	switch {
	case o.parent <= 0:
		return o, fmt.Errorf("--parent-pid: must be a pid greater than 0, got %d", o.parent)
	case o.grace < 0:
		return o, fmt.Errorf("--kill-grace: must not be negative, got %s", o.grace)
	case len(o.argv) == 0:
		return o, errors.New("no command after --")
	}
	if uid == -1 && gid == -1 && groups == "" && dir == "" {
		return o, nil
	}
	as, err := parseIdentity(uid, gid, groups, dir)
	o.as = as
	return o, err
}

// parseIdentity checks the identity flags, which come all together.
func parseIdentity(uid, gid int, groups, dir string) (*Identity, error) {
	switch {
	case uid <= 0:
		return nil, fmt.Errorf("--uid: must be a uid greater than 0 (a task never runs as root this way), got %d", uid)
	case gid < 0:
		return nil, fmt.Errorf("--gid: required with --uid, and not negative, got %d", gid)
	case dir == "" || dir[0] != '/':
		return nil, fmt.Errorf("--dir: required with --uid, an absolute path, got %q", dir)
	}
	as := &Identity{UID: uid, GID: gid, Dir: dir}
	if groups != "" {
		for _, g := range strings.Split(groups, ",") {
			n, err := strconv.Atoi(g)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("--groups: %q must be a comma-separated list of gids", groups)
			}
			as.Groups = append(as.Groups, n)
		}
	}
	return as, nil
}

// reapChildren waits for every child of the supervisor, the task's leader
// and the orphans reparented to it as a subreaper, and sends the leader's
// wait status on leader. It runs until the process exits.
func reapChildren(pid int, leader chan<- syscall.WaitStatus) {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if err != nil {
			if err != syscall.EINTR {
				time.Sleep(20 * time.Millisecond) // ECHILD: an orphan may still be reparented to us
			}
			continue
		}
		if got == pid {
			leader <- ws
		}
	}
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

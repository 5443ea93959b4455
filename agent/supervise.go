package agent

import (
	"bufio"
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

// SupervisorCommand is the hidden subcommand of the vigil binary that runs
// one task under a supervisor (Supervise). The agent starts
//
//	<Config.SupervisorPath> __supervise --parent-pid <agent pid> --kill-grace <d> -- <command...>
//
// with the task's environment, stdout and stderr, and a status pipe as
// file descriptor 3.
const SupervisorCommand = "__supervise"

// supervisorStatusFD is the supervisor's descriptor of the status pipe.
const supervisorStatusFD = 3

// parentPollInterval is how often the supervisor checks that its agent is
// still its parent, behind the parent-death signal.
const parentPollInterval = 200 * time.Millisecond

// Status lines the supervisor writes on the status pipe, one per line:
//
//	started <pid>          the task runs as pid, leader of process group pid
//	start_failed <text>    the task could not start (not found, permission)
//	exited <code>          the task's leader exited with code
//	signaled <signum>      the task's leader was killed by a signal
//	leftover <pgid>        the leader is gone but its group is not; killing it
const (
	statusStarted     = "started"
	statusStartFailed = "start_failed"
	statusExited      = "exited"
	statusSignaled    = "signaled"
	statusLeftover    = "leftover"
)

// Exit codes of the supervisor itself, for when it cannot report the
// task's own (as `env` and container runtimes do): 125 when the
// supervisor failed, 127 when the task could not be started. Otherwise it
// exits with the task's code, or 128 + the signal number.
const (
	supervisorFailed = 125
	supervisorNoExec = 127
)

// Supervise is the body of `vigil __supervise` and returns its exit code.
// It exists so that a task's process tree dies with its agent, even when
// the agent is killed with SIGKILL:
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
//
// The task inherits stdin, stdout, stderr and the environment; never the
// status pipe. After the start the supervisor writes nothing to stdout or
// stderr: the agent holding their other ends may be dead.
func Supervise(args []string) int {
	status := os.NewFile(supervisorStatusFD, "vigil-supervisor-status")
	report := func(kind, detail string) {
		if status != nil {
			_, _ = fmt.Fprintf(status, "%s %s\n", kind, strings.ReplaceAll(detail, "\n", " "))
		}
	}
	if status != nil {
		syscall.CloseOnExec(supervisorStatusFD) // the task must not hold the pipe open
	}
	fail := func(format string, a ...any) int {
		msg := fmt.Sprintf("vigil "+SupervisorCommand+": "+format, a...)
		fmt.Fprintln(os.Stderr, msg)
		report(statusStartFailed, msg)
		return supervisorFailed
	}
	fs := flag.NewFlagSet(SupervisorCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	parent := fs.Int("parent-pid", 0, "pid of the agent; its death kills the task")
	grace := fs.Duration("kill-grace", DefaultKillGrace, "SIGTERM to SIGKILL delay")
	if err := fs.Parse(args); err != nil {
		return fail("%v", err)
	}
	argv := fs.Args()
	switch {
	case *parent <= 0:
		return fail("--parent-pid: must be a pid greater than 0, got %d", *parent)
	case *grace < 0:
		return fail("--kill-grace: must not be negative, got %s", *grace)
	case len(argv) == 0:
		return fail("no command after --")
	}
	sigs := make(chan os.Signal, 16)
	ossignal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
		return fail("PR_SET_PDEATHSIG: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	parentGone := func() bool { return os.Getppid() != *parent }
	if parentGone() {
		return fail("agent (pid %d) exited before the task started", *parent)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		report(statusStartFailed, err.Error())
		return supervisorNoExec
	}
	pid := cmd.Process.Pid
	report(statusStarted, strconv.Itoa(pid))
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
				report(statusSignaled, strconv.Itoa(int(ws.Signal())))
				code = 128 + int(ws.Signal())
			} else {
				report(statusExited, strconv.Itoa(code))
			}
			if syscall.Kill(-pid, 0) == nil {
				report(statusLeftover, strconv.Itoa(pid))
				killGroup(pid, *grace, quiet)
			}
			return code
		case sig := <-sigs:
			if parentGone() {
				killGroup(pid, *grace, quiet)
				return supervisorFailed
			}
			_ = syscall.Kill(-pid, sig.(syscall.Signal))
		case <-tick.C:
			if parentGone() {
				killGroup(pid, *grace, quiet)
				return supervisorFailed
			}
		}
	}
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

// supervisorMsg is one parsed status line.
type supervisorMsg struct {
	kind string
	n    int    // the pid, code or signal number
	text string // start_failed's message
}

// readSupervisor parses the status pipe r into a channel that is closed at
// EOF, that is once the supervisor has exited. Lines it cannot parse are
// dropped.
func readSupervisor(r io.ReadCloser) <-chan supervisorMsg {
	ch := make(chan supervisorMsg, 8)
	go func() {
		defer close(ch)
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			kind, rest, _ := strings.Cut(sc.Text(), " ")
			m := supervisorMsg{kind: kind, text: rest}
			if kind != statusStartFailed {
				n, err := strconv.Atoi(rest)
				if err != nil {
					continue
				}
				m.n = n
			}
			ch <- m
		}
	}()
	return ch
}

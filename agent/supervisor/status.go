package supervisor

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"time"
)

// Kind is the first word of a status line. The supervisor writes one
// line per event on the status pipe, "<kind> <detail>\n":
//
//	started <pid>          the task runs as pid, leader of process group pid
//	start_failed <text>    the task could not start (not found, permission, bad arguments)
//	exited <code>          the task's leader exited with code
//	signaled <signum>      the task's leader was killed by a signal
//	leftover <pgid>        the leader is gone but its group is not; killing it
type Kind string

// The status line kinds (see Kind).
const (
	KindStarted     Kind = "started"
	KindStartFailed Kind = "start_failed"
	KindExited      Kind = "exited"
	KindSignaled    Kind = "signaled"
	KindLeftover    Kind = "leftover"
)

// Status is one parsed status line.
type Status struct {
	Kind Kind
	// N is the pid, exit code or signal number; 0 for KindStartFailed.
	N int
	// Text is KindStartFailed's message.
	Text string
}

// Identity is the OS user a task runs as when it is not the agent's own
// (the agent's --task-user or a task's run_as_user,
// docs/task-environment.md): the numeric ids the agent resolved from the
// user's name, so that the supervisor reads no user database per start.
type Identity struct {
	// UID and GID are the user's id and primary group id; UID is never 0.
	UID, GID int
	// Groups are the supplementary group ids; empty: none.
	Groups []int
	// Dir is the task's working directory, an absolute path the user may
	// write.
	Dir string
}

// Args returns the supervisor's arguments after its program (and
// subcommand) name: the agent's pid, whose death kills the task, the
// SIGTERM to SIGKILL delay (a Go duration string on the command line),
// the identity to switch to (nil: none), and the task's argv after "--".
// Run parses exactly this shape.
func Args(parentPID int, killGrace time.Duration, as *Identity, command []string) []string {
	args := make([]string, 0, 14+len(command))
	args = append(args, "--parent-pid", strconv.Itoa(parentPID), "--kill-grace", killGrace.String())
	if as != nil {
		args = append(args, "--uid", strconv.Itoa(as.UID), "--gid", strconv.Itoa(as.GID), "--dir", as.Dir)
		if len(as.Groups) > 0 {
			gs := make([]string, len(as.Groups))
			for i, g := range as.Groups {
				gs[i] = strconv.Itoa(g)
			}
			args = append(args, "--groups", strings.Join(gs, ","))
		}
	}
	args = append(args, "--")
	return append(args, command...)
}

// ReadStatus parses the status pipe r into a channel that is closed at
// EOF, that is once the supervisor (and every holder of the write end)
// has exited; it closes r then. Lines it cannot parse are dropped: a
// supervisor that dies mid-line reports nothing rather than garbage.
func ReadStatus(r io.ReadCloser) <-chan Status {
	ch := make(chan Status, 8)
	go func() {
		defer close(ch)
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			kind, rest, _ := strings.Cut(sc.Text(), " ")
			m := Status{Kind: Kind(kind), Text: rest}
			if m.Kind != KindStartFailed {
				n, err := strconv.Atoi(rest)
				if err != nil {
					continue
				}
				m.N = n
			}
			ch <- m
		}
	}()
	return ch
}

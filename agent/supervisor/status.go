package supervisor

import (
	"strconv"
	"strings"
	"time"
)

// Kind is the first word of a status line. The supervisor writes one
// line per event of a task on its connection to the agent,
// "<kind> <task id> <detail>\n", where the task id is the one the agent
// gave the task's start request:
//
//	started <id> <pid>          the task runs as pid, leader of process group pid
//	start_failed <id> <text>    the task could not start (not found, permission, bad request)
//	leftover <id> <pgid>        the leader is gone but its group is not; killing it
//	exited <id> <code>          the task's leader exited with code
//	signaled <id> <signum>      the task's leader was killed by a signal
//
// start_failed, exited and signaled are a task's last line: exited and
// signaled come once its group is gone (after leftover, if any), so the
// task's output pipes have their writers closed by then.
type Kind string

// The status line kinds (see Kind).
const (
	KindStarted     Kind = "started"
	KindStartFailed Kind = "start_failed"
	KindLeftover    Kind = "leftover"
	KindExited      Kind = "exited"
	KindSignaled    Kind = "signaled"
)

// last reports whether k ends a task's lines.
func (k Kind) last() bool {
	return k == KindStartFailed || k == KindExited || k == KindSignaled
}

// Status is one parsed status line.
type Status struct {
	// ID is the task's id, from its start request.
	ID   uint64
	Kind Kind
	// N is the pid, exit code or signal number; 0 for KindStartFailed.
	N int
	// Text is KindStartFailed's message.
	Text string
}

// line is s as the supervisor writes it; a newline in Text becomes a
// space.
func (s Status) line() string {
	detail := strconv.Itoa(s.N)
	if s.Kind == KindStartFailed {
		detail = strings.ReplaceAll(s.Text, "\n", " ")
	}
	return string(s.Kind) + " " + strconv.FormatUint(s.ID, 10) + " " + detail + "\n"
}

// parseStatus parses one line without its newline; ok is false for a
// line it cannot parse (a supervisor that died mid-line reports nothing
// rather than garbage).
func parseStatus(l string) (s Status, ok bool) {
	kind, rest, ok1 := strings.Cut(l, " ")
	id, detail, ok2 := strings.Cut(rest, " ")
	n, err := strconv.ParseUint(id, 10, 64)
	if !ok1 || !ok2 || err != nil {
		return Status{}, false
	}
	s = Status{ID: n, Kind: Kind(kind)}
	switch s.Kind {
	case KindStartFailed:
		s.Text = detail
	case KindStarted, KindLeftover, KindExited, KindSignaled:
		if s.N, err = strconv.Atoi(detail); err != nil {
			return Status{}, false
		}
	default:
		return Status{}, false
	}
	return s, true
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
// subcommand) name: the agent's pid, whose death kills every task the
// supervisor started, and the SIGTERM to SIGKILL delay (a Go duration
// string on the command line). Run parses exactly this shape.
func Args(parentPID int, killGrace time.Duration) []string {
	return []string{"--parent-pid", strconv.Itoa(parentPID), "--kill-grace", killGrace.String()}
}

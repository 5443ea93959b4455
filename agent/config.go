package agent

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/vigil-sched/vigil/agent/supervisor"
	"github.com/vigil-sched/vigil/api/protocol"
)

// Defaults that New applies to zero Config fields.
const (
	// DefaultCapacity is the number of concurrent TIs per agent.
	DefaultCapacity = 4
	// DefaultDrainTimeout bounds a graceful shutdown.
	DefaultDrainTimeout = 5 * time.Minute
	// DefaultClaimWait is the claim long-poll wait (docs/design.md §4: up to 30 s).
	DefaultClaimWait = 30 * time.Second
	// DefaultEventBufferSize is the outage event ring size (docs/design.md §4).
	DefaultEventBufferSize = 5000
	// DefaultLogBufferSize is the log line ring size (docs/design.md §4).
	DefaultLogBufferSize = 10000
	// DefaultKillGrace is the SIGTERM to SIGKILL delay for a process group.
	DefaultKillGrace = 10 * time.Second
	// MaxClaimWindow bounds Config.ClaimWindow: the window delays a
	// freed slot's next TI by up to its length, so it stays short.
	MaxClaimWindow = time.Second
	// MaxClaimWait is the server's cap on a claim long poll (docs/design.md §4);
	// New rejects a larger Config.ClaimWait.
	MaxClaimWait = 30 * time.Second
)

// defaultHeartbeat applies when neither Config nor the server sets an
// interval (docs/design.md §4: every 15 s by default).
const defaultHeartbeat = 15 * time.Second

// Config configures an Agent. Zero values take the documented defaults;
// New rejects invalid values with an error naming the field.
type Config struct {
	// Servers are the control plane base URLs ("http://host:8080"), one or
	// more replicas. Any replica serves any request, so after a connection
	// failure the agent moves on to the next one. Required.
	Servers []string
	// Token is the agent bearer token, sent as "Authorization: Bearer".
	// Empty sends no header (a server without authentication).
	Token string
	// Name identifies the agent to operators. Default: "<hostname>-<pid>".
	Name string
	// Tags are matched against each task's required tags (docs/design.md §4).
	Tags []string
	// Capacity is how many TIs run concurrently. Default 4.
	Capacity int
	// DrainTimeout bounds shutdown: how long running tasks may finish, and
	// their results be delivered, before their process groups are killed.
	// Default 5m.
	DrainTimeout time.Duration
	// ClaimWait is the claim long-poll wait, at most 30s. Default 30s.
	ClaimWait time.Duration
	// ClaimWindow is how long a freed slot waits for the agent's other
	// running tasks to free more before the agent claims, unless half
	// its slots are free already (SlotWait): fewer, larger claim rounds
	// under load. At most MaxClaimWindow; 0 takes DefaultClaimWindow;
	// ClaimWindowOff claims as soon as one slot is free.
	ClaimWindow time.Duration
	// HeartbeatInterval overrides the interval from the register reply;
	// 0 uses the server's value (docs/design.md §4: 15s by default). A value longer
	// than the server's is lowered to the server's, which validated its
	// agent-lost threshold against it.
	HeartbeatInterval time.Duration
	// HTTPClient sends the requests; nil uses a new http.Client on
	// NewTransport. Requests
	// carry their own deadlines (RequestTimeout of the server's heartbeat
	// interval, at most 15 s, plus ClaimWait for a claim), so it needs no
	// Timeout; one shorter than ClaimWait would break the long poll.
	HTTPClient *http.Client
	// Logger receives structured logs; nil uses slog.Default().
	Logger *slog.Logger
	// EventBufferSize bounds the completions buffered during an outage.
	// Default 5000 (docs/design.md §4).
	EventBufferSize int
	// LogBufferSize bounds the log lines waiting to be shipped. While the
	// agent is connected a full buffer holds the task back (it blocks on
	// its write) until the control plane takes the lines, so nothing is
	// lost; while it is disconnected the oldest line is dropped and counted
	// in the outage's gap marker. Lines already sent but unacknowledged
	// (one batch, at most 500) and those a gap marker announced are held
	// apart until delivered, so a replay may hold up to 2 × LogBufferSize
	// + 500 lines. Default 10000 (docs/design.md §4).
	LogBufferSize int
	// KillGrace is the delay between SIGTERM and SIGKILL when the agent
	// kills a process group. Default 10s.
	KillGrace time.Duration
	// TaskEnvAllow names the variables of the agent's environment that a
	// task inherits; an entry ending in "*" is a prefix ("LC_*"). nil
	// uses DefaultTaskEnvAllow; an empty, non-nil list passes none. A task
	// also gets its DAG env and the VIGIL_* identity variables (EnvRunID
	// and the others), and nothing else: entries that would match a
	// VIGIL_* variable (the agent's configuration and tokens) are refused.
	TaskEnvAllow []string
	// TaskUser is the OS user every task runs as, unless its run_as_user
	// names another (docs/task-environment.md): the supervisor switches to
	// it (groups, gid, uid) before it starts the task, in a fresh working
	// directory the user owns, with HOME, USER and LOGNAME set for it. A
	// task then reads none of the agent's files that the user may not.
	// Needs the agent to run as root; New refuses it otherwise, and
	// refuses a user that does not exist or is root. Empty: tasks run as
	// the agent's own user.
	TaskUser string
	// TaskUsersAllowed lists the users a task's run_as_user may name; a
	// task naming any other fails with start_failed. Needs root, as
	// TaskUser. Empty: no task may name one.
	TaskUsersAllowed []string
	// SupervisorPath is the program the agent's tasks run under (package
	// agent/supervisor): it kills every task's process group when the
	// agent dies, even by SIGKILL. The agent starts it once, at its first
	// task (again if it exits), as
	//	<SupervisorPath> <SupervisorArgs...> --parent-pid P --kill-grace D
	// and sends it each task (adr/0035-one-supervisor-per-agent.md).
	// Default: vigil-supervise (supervisor.ProgramName) in the running
	// executable's directory when that is an executable regular file;
	// otherwise the running executable itself (os.Executable) with
	// SupervisorArgs ["__supervise"], which is vigil for `vigil agent` and
	// `vigil lite`. vigil-supervise is a 3.6 MB program, against vigil's
	// 38 MB (adr/0026-small-supervisor-program.md). A program embedding
	// package agent installs vigil-supervise beside itself, sets this
	// field, or dispatches supervisor.Subcommand to supervisor.Run in its
	// own main.
	SupervisorPath string
	// SupervisorArgs are the arguments placed before the supervisor's own:
	// nil for vigil-supervise, ["__supervise"] for a vigil binary. The
	// default fills them with SupervisorPath; setting them without
	// SupervisorPath is an error naming this field.
	SupervisorArgs []string

	users map[string]*taskUser // TaskUser and TaskUsersAllowed resolved by normalize
}

// normalize validates c and returns a copy with defaults applied.
func (c Config) normalize() (Config, error) {
	var err error
	if c.Servers, err = normalizeServers(c.Servers); err != nil {
		return c, err
	}
	if c.Tags, err = normalizeTags(c.Tags); err != nil {
		return c, err
	}
	if strings.ContainsFunc(c.Token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return c, fieldErr("Token", "must not contain whitespace or control characters")
	}
	if err = c.applyDurations(); err != nil {
		return c, err
	}
	if err = c.applyCounts(); err != nil {
		return c, err
	}
	if c.TaskEnvAllow, err = normalizeTaskEnvAllow(c.TaskEnvAllow); err != nil {
		return c, err
	}
	if err = c.applySupervisor(); err != nil {
		return c, err
	}
	if c.users, err = c.taskUsers(); err != nil {
		return c, err
	}
	if c.Name == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "agent"
		}
		c.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Transport: NewTransport()}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// applySupervisor fills SupervisorPath and SupervisorArgs when
// SupervisorPath is empty (see Config.SupervisorPath).
func (c *Config) applySupervisor() error {
	if c.SupervisorPath != "" {
		return nil
	}
	if c.SupervisorArgs != nil {
		return fieldErr("SupervisorArgs", fmt.Sprintf("%q must be empty when SupervisorPath is (they are the leading arguments of that program)", c.SupervisorArgs))
	}
	exe, err := os.Executable()
	if err != nil {
		return fieldErr("SupervisorPath", fmt.Sprintf("is empty and the running executable cannot be found: %v", err))
	}
	c.SupervisorPath, c.SupervisorArgs = defaultSupervisor(exe)
	return nil
}

// defaultSupervisor is the supervisor for an agent running as exe:
// supervisor.ProgramName beside exe when it is a regular file (following
// symlinks) this process may execute, else exe itself with
// supervisor.Subcommand.
func defaultSupervisor(exe string) (path string, args []string) {
	sibling := filepath.Join(filepath.Dir(exe), supervisor.ProgramName)
	if fi, err := os.Stat(sibling); err == nil && fi.Mode().IsRegular() && unix.Access(sibling, unix.X_OK) == nil {
		return sibling, nil
	}
	return exe, []string{supervisor.Subcommand}
}

func normalizeServers(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, fieldErr("Servers", "must list at least one server URL")
	}
	out := make([]string, len(in))
	for i, s := range in {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fieldErr(fmt.Sprintf("Servers[%d]", i), fmt.Sprintf("%q must be an http(s) URL with a host", s))
		}
		out[i] = strings.TrimRight(s, "/")
	}
	return out, nil
}

// normalizeTags checks the tags as the server will (unique, non-empty,
// within protocol.MaxAgentTags and protocol.MaxTagLen), so a bad list
// fails at start, not at every register.
func normalizeTags(in []string) ([]string, error) {
	if len(in) > protocol.MaxAgentTags {
		return nil, fieldErr("Tags", fmt.Sprintf("%d tags, more than the %d an agent may have", len(in), protocol.MaxAgentTags))
	}
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for i, t := range in {
		if strings.TrimSpace(t) == "" || seen[t] {
			return nil, fieldErr(fmt.Sprintf("Tags[%d]", i), fmt.Sprintf("%q must be non-empty and unique", t))
		}
		if len(t) > protocol.MaxTagLen {
			return nil, fieldErr(fmt.Sprintf("Tags[%d]", i), fmt.Sprintf("%d bytes, more than the %d a tag may have", len(t), protocol.MaxTagLen))
		}
		seen[t] = true
		out = append(out, t)
	}
	return out, nil
}

func (c *Config) applyDurations() error {
	switch {
	case c.ClaimWindow == 0:
		c.ClaimWindow = DefaultClaimWindow
	case c.ClaimWindow > MaxClaimWindow:
		return fieldErr("ClaimWindow", fmt.Sprintf("must be at most %s (it delays a freed slot's next task by up to its length), got %s", MaxClaimWindow, c.ClaimWindow))
	case c.ClaimWindow < 0 && c.ClaimWindow != ClaimWindowOff:
		return fieldErr("ClaimWindow", fmt.Sprintf("must not be negative (ClaimWindowOff turns the window off), got %s", c.ClaimWindow))
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"DrainTimeout", &c.DrainTimeout, DefaultDrainTimeout},
		{"ClaimWait", &c.ClaimWait, DefaultClaimWait},
		{"HeartbeatInterval", &c.HeartbeatInterval, 0},
		{"KillGrace", &c.KillGrace, DefaultKillGrace},
	}
	for _, d := range durations {
		if *d.v < 0 {
			return fieldErr(d.name, fmt.Sprintf("must not be negative, got %s", *d.v))
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.ClaimWait > MaxClaimWait {
		return fieldErr("ClaimWait", fmt.Sprintf("must be at most %s (the server's long-poll cap), got %s", MaxClaimWait, c.ClaimWait))
	}
	return nil
}

func (c *Config) applyCounts() error {
	counts := []struct {
		name string
		v    *int
		def  int
	}{
		{"Capacity", &c.Capacity, DefaultCapacity},
		{"EventBufferSize", &c.EventBufferSize, DefaultEventBufferSize},
		{"LogBufferSize", &c.LogBufferSize, DefaultLogBufferSize},
	}
	for _, n := range counts {
		if *n.v < 0 {
			return fieldErr(n.name, fmt.Sprintf("must not be negative, got %d", *n.v))
		}
		if *n.v == 0 {
			*n.v = n.def
		}
	}
	return nil
}

// IdleConnsPerServer is how many idle connections an agent keeps to each
// control-plane URL: at least one per kind of request it has in flight at
// once (the claim long-poll, a heartbeat, a completion batch, a log
// batch), with room for a replay's. net/http keeps 2 by default, so every
// other request closed its connection after use and the next one opened
// a new one: thousands a second under a burn-down, each a TCP (or TLS)
// handshake and a server goroutine.
const IdleConnsPerServer = 8

// NewTransport returns a transport with http.DefaultTransport's settings
// and IdleConnsPerServer idle connections per host, for an agent's
// HTTPClient; a caller that sets its own TLS configuration starts from it.
func NewTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = IdleConnsPerServer
	return t
}

func fieldErr(field, rule string) error {
	return fmt.Errorf("agent: invalid config: %s %s", field, rule)
}

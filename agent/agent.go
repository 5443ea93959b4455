package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-sched/vigil/agent/supervisor"
	"github.com/vigil-sched/vigil/api/protocol"
)

// ErrDrainTimeout is returned (wrapped) by Run when tasks were still running
// at the end of Config.DrainTimeout and their process groups were killed.
var ErrDrainTimeout = errors.New("agent: drain timeout expired")

// ErrUndelivered is returned (wrapped) by Run when completions or log lines
// could not be delivered before shutdown, e.g. because the control plane
// was unreachable for the whole drain.
var ErrUndelivered = errors.New("agent: results not delivered before shutdown")

// Timing that is not part of Config. Tests shorten some of them.
const (
	defaultRequestTimeout = MaxRequestTimeout
	defaultShipInterval   = 250 * time.Millisecond
	// shipBatchLines queued lines wake the shipper before its interval;
	// a batch takes up to shipBatchLines lines and at most shipMaxBytes
	// of line text (always one line at least), so that one request stays
	// well within the request timeout (the heartbeat interval: a slower
	// batch counts as an outage) and the API's 40 MiB body limit.
	shipBatchLines = 500
	shipMaxBytes   = 4 << 20
	// finalFlushTimeout is how long delivery may take after the drain
	// deadline forced kills.
	finalFlushTimeout = 5 * time.Second
	// pipeWaitDelay bounds the wait for output pipes after a task's leader
	// exited, when a descendant still holds them open; time spent waiting
	// for the control plane to take lines does not count (outPipe.drain).
	pipeWaitDelay = 5 * time.Second
)

// Agent pulls task instances from the control plane and runs them
// (docs/design.md §4). Create it with New; Run it once.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	cl      *client
	started atomic.Bool

	// clockOffset shifts wallNow: zero but in a test build (wallclock.go).
	clockOffset time.Duration

	// Tunables outside Config; tests shorten them.
	newBackoff   func() *backoff
	reqTimeout   time.Duration
	shipInterval time.Duration
	pipeWait     time.Duration

	hbInterval  atomic.Int64 // time.Duration in effect
	srvInterval atomic.Int64 // time.Duration the server announced; 0 before the first register
	hbMu        sync.Mutex   // serializes heartbeats
	hbCovered   uint64       // startGen included in the last heartbeat; hbMu and mu

	// sup is the task supervisor (process.go), started at the first task
	// and again after it exits; supClosed once Run has stopped it.
	supMu     sync.Mutex
	sup       *supervisor.Client
	supClosed bool

	// claimCancel ends the claim long-poll in flight (see claimContext);
	// guarded by mu.
	claimCancel context.CancelFunc

	mu       sync.Mutex
	st       linkState // see link.go
	attempts map[string]*attempt
	events   *ring[pendingCompletion]
	logs     *logQueue
	// logRoom is signalled (with mu) whenever a task blocked on a full
	// log queue may go on: lines left the ring, the link went down, or
	// the shipper stopped (logsClosed).
	logRoom    *sync.Cond
	logsClosed bool
	startGen   uint64 // counts process starts, see heartbeat
	// Completion batching (batch.go): the queue and whether a sender
	// runs; noBatch once the server lacked the batch route.
	batchMu      sync.Mutex
	batch        []*batchItem
	batchSending bool
	noBatch      atomic.Bool

	// reporting holds, by attempt id, the attempts that ended and whose
	// completion the server has not yet acknowledged (or the agent not
	// yet buffered for an outage): their slots are not free yet, and
	// every heartbeat still lists them, so the agent-lost reaper counts
	// the attempt alive while its agent is (docs/design.md §4 heartbeat).
	reporting map[string]protocol.HeartbeatEntry
	shipped   chan struct{} // closed and replaced after each shipped batch

	wakeReconnect chan struct{}
	wakeHeartbeat chan struct{}
	wakeShip      chan struct{}
	slotFreed     chan struct{}
	slots         SlotWait // when the claim loop claims (claimwindow.go); tests step its After

	tasks sync.WaitGroup // task runners
	bg    sync.WaitGroup // process-group killers

	users    map[string]*taskUser // Config.TaskUser and TaskUsersAllowed, resolved
	workMu   sync.Mutex
	workBase string // root-owned parent of the task users' working directories; "" until needed
}

// New validates cfg, applies defaults, and returns an Agent. The error names
// the offending Config field. New does no network I/O; it looks up
// Config.TaskUser and TaskUsersAllowed in the user database.
func New(cfg Config) (*Agent, error) {
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	a := &Agent{
		cfg:           cfg,
		users:         cfg.users,
		log:           cfg.Logger.With("component", "agent", "agent_name", cfg.Name),
		cl:            &client{http: noRedirects(cfg.HTTPClient), token: cfg.Token},
		newBackoff:    newBackoff,
		reqTimeout:    defaultRequestTimeout,
		shipInterval:  defaultShipInterval,
		pipeWait:      pipeWaitDelay,
		attempts:      make(map[string]*attempt),
		reporting:     make(map[string]protocol.HeartbeatEntry),
		events:        newRing[pendingCompletion](cfg.EventBufferSize),
		logs:          newLogQueue(cfg.LogBufferSize),
		wakeReconnect: make(chan struct{}, 1),
		wakeHeartbeat: make(chan struct{}, 1),
		wakeShip:      make(chan struct{}, 1),
		slotFreed:     make(chan struct{}, 1),
	}
	a.slots = SlotWait{Capacity: cfg.Capacity, Window: cfg.ClaimWindow, Free: a.freeSlots, Freed: a.slotFreed}
	a.logRoom = sync.NewCond(&a.mu)
	a.st.upCh = make(chan struct{})
	a.shipped = make(chan struct{})
	a.setInterval(0) // Config or the default until the server replies
	if a.clockOffset, err = clockOffsetFromEnv(); err != nil {
		return nil, err
	}
	if a.clockOffset != 0 {
		a.log.Warn("test hook: the agent's wall clock is offset", "offset", a.clockOffset.String())
	}
	return a, nil
}

// Run registers with the control plane, then claims and runs TIs until ctx
// is cancelled. Until the first registration succeeds it retries transient
// failures with backoff; a rejection (401, 403, other 4xx) is returned at
// once. On cancellation it stops claiming and drains: running tasks get
// Config.DrainTimeout to finish (heartbeats continue and their completions
// are reported), then their process groups are killed. Run returns nil after
// a clean drain, or an error wrapping ErrDrainTimeout and/or ErrUndelivered.
// Run may be called once.
func (a *Agent) Run(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("agent: Run called twice")
	}
	// Network work outlives ctx: the drain still heartbeats and delivers.
	netCtx, cancelNet := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelNet()
	a.log.Info("task supervisor", "path", a.cfg.SupervisorPath, "args", a.cfg.SupervisorArgs)
	defer a.closeSupervisor()
	if a.cfg.TaskUser != "" || len(a.cfg.TaskUsersAllowed) > 0 {
		a.log.Info("tasks run as another user", "task_user", a.cfg.TaskUser, "task_users_allowed", a.cfg.TaskUsersAllowed)
	}
	defer a.removeWorkBase()
	if err := a.connect(ctx, true); err != nil {
		if ctx.Err() == nil {
			return err
		}
		// Cancelled before anything ran; an agent stopped between its
		// registration and the end of the replay still deregisters.
		a.mu.Lock()
		registered := a.st.agentID != 0
		a.mu.Unlock()
		if registered {
			_ = a.deregister(netCtx)
		}
		return nil
	}
	var loops sync.WaitGroup
	for _, loop := range []func(context.Context){a.heartbeatLoop, a.reconnectLoop, a.shipLoop, a.stopWatchLoop} {
		loops.Go(func() { loop(netCtx) })
	}
	a.claimLoop(ctx, netCtx) // returns when ctx is done
	err := a.drain()
	// Stopped on purpose (SIGTERM, SIGINT): say so at once, so the agent
	// is not listed active until the agent-lost threshold, and anything
	// it could not deliver is handled now. A failure is logged: the
	// agent-lost threshold then does the same, later.
	_ = a.deregister(netCtx)
	cancelNet()
	loops.Wait()
	a.bg.Wait()
	a.log.Info("agent stopped", "err", err)
	return err
}

// drain waits for running tasks (killing them at the deadline) and for
// their results to be delivered.
func (a *Agent) drain() error {
	deadline := time.Now().Add(a.cfg.DrainTimeout)
	a.log.Info("draining", "running", a.inFlightCount(), "drain_timeout", a.cfg.DrainTimeout)
	done := make(chan struct{})
	go func() { a.tasks.Wait(); close(done) }()
	var errs []error
	timer := time.NewTimer(a.cfg.DrainTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		n := a.killAll()
		a.log.Warn("drain timeout expired; killed remaining process groups", "killed", n, "drain_timeout", a.cfg.DrainTimeout)
		errs = append(errs, fmt.Errorf("%w after %s: killed %d task(s)", ErrDrainTimeout, a.cfg.DrainTimeout, n))
		<-done // bounded: SIGKILL follows after KillGrace, pipes close after pipeWait
		deadline = time.Now().Add(finalFlushTimeout)
	}
	if c, l := a.flush(deadline); c+l > 0 {
		a.log.Error("shutting down with undelivered results", "completions", c, "log_lines", l)
		errs = append(errs, fmt.Errorf("%w: %d completion(s), %d log line(s)", ErrUndelivered, c, l))
	}
	return errors.Join(errs...)
}

// flush waits until both buffers are empty, or until
// deadline; it returns what is still undelivered.
func (a *Agent) flush(deadline time.Time) (completions, lines int) {
	for {
		a.mu.Lock()
		completions, lines = a.events.Len(), a.logs.Len()
		a.mu.Unlock()
		// Nothing buffered means nothing to deliver, whether or not the
		// control plane is reachable: do not wait out the deadline.
		if completions+lines == 0 {
			return 0, 0
		}
		if time.Now().After(deadline) {
			return completions, lines
		}
		signal(a.wakeShip)
		time.Sleep(20 * time.Millisecond)
	}
}

// killAll kills the process group of every running attempt for the drain
// deadline and returns how many it signalled.
func (a *Agent) killAll() int {
	a.mu.Lock()
	list := make([]*attempt, 0, len(a.attempts))
	for _, att := range a.attempts {
		list = append(list, att)
	}
	a.mu.Unlock()
	n := 0
	for _, att := range list {
		if a.kill(att, causeDrain, "") {
			a.systemLine(att, fmt.Sprintf("--- agent shutting down: drain timeout %s expired, killing process group ---", a.cfg.DrainTimeout))
			n++
		}
	}
	return n
}

func (a *Agent) interval() time.Duration { return time.Duration(a.hbInterval.Load()) }

// setInterval applies the heartbeat interval: Config wins, then the
// server's value, then the docs/design.md §4 default of 15 s. A Config value longer
// than the server's is lowered to the server's: the server validates its
// agent-lost threshold against the interval it announces, and a slower
// agent would be reaped across a failover. The server's value also sets
// the request timeout (RequestTimeout).
func (a *Agent) setInterval(server time.Duration) {
	if server > 0 {
		a.srvInterval.Store(int64(server))
	}
	d := a.cfg.HeartbeatInterval
	if server > 0 && d > server {
		a.log.Warn("HeartbeatInterval is longer than the interval the control plane announced; using the control plane's",
			"configured", d, "announced", server)
		d = server
	}
	if d <= 0 {
		d = server
	}
	if d <= 0 {
		d = defaultHeartbeat
	}
	a.hbInterval.Store(int64(d))
}

func (a *Agent) inFlightCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.attempts)
}

// signal does a non-blocking send on a 1-buffered wake-up channel.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// sleepCtx sleeps for d or until ctx is done; it reports whether ctx is
// still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// deregister tells the control plane this agent stopped, so it is
// listed deregistered at once (not active until the agent-lost
// threshold), and anything it still held is requeued or failed at once
// instead of after that threshold. A later process of the same name
// takes the name over at once (store.Register). It tries each server
// once.
func (a *Agent) deregister(ctx context.Context) error {
	a.mu.Lock()
	c := a.connLocked()
	a.mu.Unlock()
	var err error
	for i := range a.cfg.Servers {
		base := a.cfg.Servers[(i+indexOf(a.cfg.Servers, c.base))%len(a.cfg.Servers)]
		url := fmt.Sprintf("%s/v1/agents/%d/deregister", base, c.agentID)
		if err = a.cl.post(ctx, "deregister", url, 10*time.Second, struct{}{}, nil); err == nil {
			a.log.Info("deregistered", "agent_id", c.agentID)
			return nil
		}
	}
	a.log.Error("deregistration failed; the server will reap this agent's work after the agent-lost threshold", "err", err)
	return fmt.Errorf("deregister: %w", err)
}

func indexOf(list []string, v string) int {
	for i, s := range list {
		if s == v {
			return i
		}
	}
	return 0
}

package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
)

type linkStateKind int

const (
	stateDown      linkStateKind = iota // unregistered, unreachable or forgotten
	stateReplaying                      // registered, replaying buffers
	stateUp                             // normal operation
)

// linkState is the agent's view of its connection. Guarded by Agent.mu.
type linkState struct {
	state   linkStateKind
	gen     uint64 // bumped on every successful register
	agentID int64
	server  int           // index into Config.Servers
	rotate  bool          // move to the next server before the next register
	upCh    chan struct{} // closed while state == stateUp
	outage  *outage       // non-nil from the first transient failure until replay ends
	// finishedSeq holds the marker Seqs last reserved for finished attempts.
	finishedSeq map[string]int64
}

// outage records one period of unreachability (KiCI agent reconnection).
type outage struct {
	start       time.Time // monotonic: the marker text's duration
	wallStart   time.Time // the agent's wall clock (wallNow): the markers' Time
	logEnd      uint64    // the log queue's End when it began: lines below sort before its markers
	dropBase    uint64    // ring drops before the outage
	heartbeats  int       // heartbeats due while down, superseded by the next one
	markers     []protocol.LogLine
	markersSent bool
}

// conn is a snapshot of the link for one request. gen lets a failure that
// arrives after a reconnect be recognized as stale.
type conn struct {
	gen     uint64
	agentID int64
	base    string
}

func (a *Agent) connLocked() conn {
	return conn{gen: a.st.gen, agentID: a.st.agentID, base: a.cfg.Servers[a.st.server]}
}

// waitUp blocks until the link is up and returns it.
func (a *Agent) waitUp(ctx context.Context) (conn, error) {
	for {
		a.mu.Lock()
		c, up, ch := a.connLocked(), a.st.state == stateUp, a.st.upCh
		a.mu.Unlock()
		if up {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return conn{}, ctx.Err()
		case <-ch:
		}
	}
}

// linkFailed takes the link down after err (which needsReconnect) on a
// request made with c, and wakes the reconnect loop. A failure from an
// older registration is ignored: the link has moved on since.
func (a *Agent) linkFailed(c conn, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.markDownLocked(c.gen, err)
}

// markDownLocked is linkFailed with a.mu held; it reports whether the
// failure was current.
func (a *Agent) markDownLocked(gen uint64, err error) bool {
	if gen != a.st.gen {
		return false
	}
	if a.st.state == stateUp {
		a.st.upCh = make(chan struct{})
		a.log.Warn("control plane link lost", "server", a.cfg.Servers[a.st.server], "err", err)
	}
	a.st.state = stateDown
	a.logRoom.Broadcast() // a disconnected agent buffers and drops instead of blocking tasks
	a.cancelClaimLocked() // a long poll on the failed replica must not hold the work back
	if isTransient(err) {
		a.st.rotate = true // fail over to the next replica
		a.startOutageLocked()
	}
	signal(a.wakeReconnect)
	return true
}

// startOutageLocked opens an outage and reserves the gap-marker Seqs (see
// the package doc): the next Seq of every live attempt, and for a finished
// attempt whose lines are still queued, the Seq after its last line (or
// after its marker from an earlier outage, so Seqs never repeat). An
// outage whose markers were already sent (its replay failed later) is
// replaced, so that what is lost from now on has a marker to count it;
// so is the link going down for a reason that opened none (the server
// forgot the agent) when a line must be dropped meanwhile.
func (a *Agent) startOutageLocked() {
	if (a.st.outage != nil && !a.st.outage.markersSent) || a.st.gen == 0 {
		return
	}
	now := time.Now()
	o := &outage{start: now, wallStart: a.wallAt(now), logEnd: a.logs.End(), dropBase: a.events.Dropped() + a.logs.Dropped()}
	a.st.outage = o
	for _, att := range a.attempts {
		a.reserveMarkerLocked(att)
	}
	last := map[string]protocol.LogLine{}
	for l := range a.logs.All() {
		if _, live := a.attempts[l.AttemptID]; !live {
			last[l.AttemptID] = l // the ring is in capture order: the last wins
		}
	}
	reserved := make(map[string]int64, len(last))
	for id, l := range last {
		seq := max(l.Seq, a.st.finishedSeq[id]) + 1
		reserved[id] = seq
		o.markers = append(o.markers, protocol.LogLine{
			Attempt: l.Attempt, Seq: seq, Stream: protocol.StreamSystem, Time: o.wallStart,
		})
	}
	a.st.finishedSeq = reserved // only attempts with queued lines can need it again
}

func (a *Agent) reserveMarkerLocked(att *attempt) {
	o := a.st.outage
	if o == nil || o.markersSent {
		return
	}
	att.seq++
	o.markers = append(o.markers, protocol.LogLine{
		Attempt: att.task.Attempt, Seq: att.seq, Stream: protocol.StreamSystem, Time: o.wallStart,
	})
}

// reconnectLoop re-registers whenever the link goes down.
func (a *Agent) reconnectLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wakeReconnect:
			_ = a.connect(ctx, false)
		}
	}
}

// connect registers until it succeeds and its replay completes. It tries
// the servers in rotation, sleeping a backoff step once it has tried each in
// turn. With initial set a rejection (non-transient error) is returned;
// otherwise it is logged and retried, because tasks are still running.
func (a *Agent) connect(ctx context.Context, initial bool) error {
	bo := a.newBackoff()
	// Retry at least once per heartbeat interval (below the 60 s cap when
	// the interval is shorter): the server's post-leadership grace lasts one
	// agent-lost threshold, at least two intervals, and an agent that
	// sleeps past it would have its healthy tasks reaped.
	if iv := a.interval(); iv > 0 && iv < bo.Max {
		bo.Max = iv
	}
	tried := 0
	for try := 1; ; try++ {
		a.mu.Lock()
		if !initial && a.st.state == stateUp {
			a.mu.Unlock()
			return nil
		}
		if a.st.rotate {
			a.st.server = (a.st.server + 1) % len(a.cfg.Servers)
			a.st.rotate = false
		}
		idx := a.st.server
		a.mu.Unlock()
		err := a.registerAndReplay(ctx, idx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if initial && !isTransient(err) {
			return fmt.Errorf("agent: register with %s: %w", a.cfg.Servers[idx], err)
		}
		a.registerFailed(err)
		var delay time.Duration
		if tried++; tried >= len(a.cfg.Servers) || !isTransient(err) {
			delay, tried = bo.Next(), 0
		}
		lvl := a.log.Warn
		if !isTransient(err) {
			lvl = a.log.Error
		}
		lvl("reconnecting to control plane", "attempt", try, "server", a.cfg.Servers[idx], "backoff", delay, "err", err)
		if !sleepCtx(ctx, delay) {
			return ctx.Err()
		}
	}
}

// registerFailed notes a failed register: try another replica next, and
// open an outage if the link was registered before.
func (a *Agent) registerFailed(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.st.rotate = true
	if isTransient(err) {
		a.startOutageLocked()
	}
}

// registerAndReplay registers with server idx, kills what the reply says to
// terminate, and replays the buffers. On a replay failure the link is down
// again and the error is returned.
func (a *Agent) registerAndReplay(ctx context.Context, idx int) error {
	base := a.cfg.Servers[idx]
	req := protocol.RegisterRequest{
		Name: a.cfg.Name, Tags: a.cfg.Tags, Capacity: a.cfg.Capacity, InFlight: a.inFlight(),
	}
	var resp protocol.RegisterResponse
	if err := a.cl.post(ctx, "register", base+"/v1/agents/register", a.timeout(), req, &resp); err != nil {
		return err
	}
	a.cl.setCredential(resp.Credential)
	a.setInterval(resp.HeartbeatInterval.D())
	a.mu.Lock()
	a.st.gen++
	a.st.agentID, a.st.server, a.st.state = resp.AgentID, idx, stateReplaying
	c := a.connLocked()
	a.mu.Unlock()
	a.log.Info("registered", "agent_id", resp.AgentID, "server", base, "in_flight", len(req.InFlight),
		"terminate", len(resp.Terminate), "heartbeat_interval", a.interval())
	for _, order := range resp.Terminate {
		a.stopOrder(order, "register")
	}
	return a.replay(ctx, c)
}

// inFlight lists the attempts whose outcome the server has not yet heard:
// running ones and those with a buffered completion (docs/design.md §4 register),
// each with its true started flag, as a heartbeat reports them: a claimed
// attempt whose process has not started yet must stay requeueable.
func (a *Agent) inFlight() []protocol.HeartbeatEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.heartbeatEntriesLocked(true)
}

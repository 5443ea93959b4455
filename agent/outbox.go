package agent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
)

// pendingCompletion is a completion waiting for delivery.
type pendingCompletion struct {
	req  protocol.CompleteRequest
	pgid int // process group, to clean up survivors after a stale reply
	log  *slog.Logger
}

// complete delivers pc now, or buffers it while the link is down. It never
// drops a completion itself; only a full event ring evicts one.
func (a *Agent) complete(ctx context.Context, pc pendingCompletion) {
	for {
		a.mu.Lock()
		if a.st.state != stateUp {
			a.bufferCompletionLocked(pc)
			a.mu.Unlock()
			return
		}
		c := a.connLocked()
		a.mu.Unlock()
		err := a.sendBatched(ctx, c, pc)
		if err == nil {
			return
		}
		a.mu.Lock()
		current := a.markDownLocked(c.gen, err)
		if current {
			a.bufferCompletionLocked(pc)
		}
		a.mu.Unlock()
		if current {
			return
		}
		// The link was re-registered while we were sending: go again.
	}
}

func (a *Agent) bufferCompletionLocked(pc pendingCompletion) {
	old, evicted := a.events.Push(pc)
	pc.log.Info("completion buffered until the control plane is reachable", "outcome", pc.req.Outcome)
	if evicted {
		old.log.Error("event buffer full: oldest buffered completion dropped",
			"outcome", old.req.Outcome, "event_buffer_size", a.cfg.EventBufferSize)
	}
}

// sendCompletion posts pc. It returns only errors that need a reconnect;
// a stale or rejected completion is logged and dropped (docs/design.md §4). direct
// is false for replays: only a fresh stale reply may signal the process
// group, since an old group id may have been reused by then.
func (a *Agent) sendCompletion(ctx context.Context, c conn, pc pendingCompletion, direct bool) error {
	var resp protocol.CompleteResponse
	url := fmt.Sprintf("%s/v1/agents/%d/complete", c.base, c.agentID)
	err := a.cl.post(ctx, "complete", url, a.timeout(), pc.req, &resp)
	switch {
	case err == nil:
		pc.log.Debug("completion delivered", "outcome", pc.req.Outcome, "state", resp.State)
	case needsReconnect(err):
		return err
	case isStale(err):
		pc.log.Warn("completion refused: attempt no longer current; dropped", "err", err)
		if direct && pc.pgid > 0 {
			a.goKillGroup(pc.pgid, pc.log)
		}
	default:
		pc.log.Error("completion rejected; dropped", "outcome", pc.req.Outcome, "err", err)
	}
	return nil
}

// replay runs after a successful register: gap markers, one heartbeat with
// the current state, buffered completions oldest first; then it marks the
// link up so the shipper sends the buffered log lines (KiCI agent
// reconnection).
func (a *Agent) replay(ctx context.Context, c conn) error {
	a.mu.Lock()
	var logEnd uint64
	if o := a.st.outage; o != nil && !o.markersSent {
		logEnd = o.logEnd
	}
	a.mu.Unlock()
	if err := a.shipBefore(ctx, c, logEnd); err != nil {
		return err
	}
	if err := a.sendMarkers(ctx, c); err != nil {
		return err
	}
	// The latest state stands in for the heartbeats buffered meanwhile; it
	// also reports as started the attempts whose completion follows.
	a.mu.Lock()
	entries := a.heartbeatEntriesLocked(true)
	a.mu.Unlock()
	if err := a.postHeartbeat(ctx, c, entries); err != nil {
		a.linkFailed(c, err)
		return err
	}
	sent := 0
	for {
		a.mu.Lock()
		pc, idx, ok := a.events.Front()
		if !ok {
			wasOutage := a.st.outage != nil
			a.st.state, a.st.outage = stateUp, nil
			close(a.st.upCh)
			lines := a.logs.Len()
			a.mu.Unlock()
			if wasOutage || sent > 0 {
				a.log.Info("replay done", "completions", sent, "log_lines_queued", lines)
			}
			break
		}
		a.mu.Unlock()
		if err := a.sendCompletion(ctx, c, pc, false); err != nil {
			a.linkFailed(c, err)
			return err
		}
		a.mu.Lock()
		a.events.DiscardBefore(idx + 1)
		a.mu.Unlock()
		sent++
	}
	signal(a.wakeHeartbeat) // report processes started during the replay
	signal(a.wakeShip)
	return nil
}

// sendMarkers sends the outage's gap markers, once per outage.
func (a *Agent) sendMarkers(ctx context.Context, c conn) error {
	a.mu.Lock()
	o := a.st.outage
	if o == nil || o.markersSent {
		a.mu.Unlock()
		return nil
	}
	dur := time.Since(o.start).Round(time.Second)
	completions := a.events.Len()
	events := o.heartbeats + completions
	lines := a.logs.Announce() // held until delivered, so the count stays true
	dropped := a.events.Dropped() + a.logs.Dropped() - o.dropBase
	markers := slices.Clone(o.markers)
	for i := range markers {
		markers[i].Dropped = int64(a.logs.Unreported(markers[i].AttemptID))
	}
	a.mu.Unlock()

	text := gapMarker(dur, events, lines, dropped)
	a.log.Info("control plane reachable again; replaying", "outage", dur, "events", events,
		"completions", completions, "log_lines", lines, "dropped", dropped, "gap_markers", len(markers))
	if len(markers) > 0 {
		for i := range markers {
			markers[i].Line = text
		}
		url := fmt.Sprintf("%s/v1/agents/%d/logs", c.base, c.agentID)
		err := a.cl.post(ctx, "logs", url, a.timeout(), protocol.LogsRequest{Lines: markers}, nil)
		if needsReconnect(err) {
			a.linkFailed(c, err)
			return err
		}
		if err != nil {
			a.log.Error("gap markers rejected; dropped", "err", err)
		}
	}
	a.mu.Lock()
	o.markersSent = true
	for _, m := range markers {
		a.logs.Reported(m.AttemptID, uint64(m.Dropped))
	}
	a.mu.Unlock()
	return nil
}

// gapMarker is the log line that precedes a replay (docs/design.md §4); the
// duration is shown in whole seconds.
func gapMarker(d time.Duration, events, lines int, dropped uint64) string {
	return fmt.Sprintf("--- control plane unreachable for %ds: replaying %d buffered events and %d log lines (%d dropped) ---",
		int64(d.Round(time.Second)/time.Second), events, lines, dropped)
}

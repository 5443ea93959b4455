package agent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// heartbeatLoop sends one heartbeat for all in-flight attempts every
// interval, and at once when woken. docs/design.md §4: one request per agent
// refreshes the agent and all of its TIs.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	t := time.NewTimer(a.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.wakeHeartbeat:
		}
		a.heartbeat(ctx, 0)
		t.Reset(a.interval())
	}
}

// heartbeat sends a heartbeat unless one built after start number covers
// (see markStarted) was already sent; covers 0 always sends, and lists
// every attempt (heartbeatEntriesLocked). Runners call it after starting a
// process, so the server records started_at before the completion
// arrives, and concurrent starts share one request. That start report
// lists only the attempts started since the last heartbeat: the periodic
// one lists them all every interval, and a start report that listed the
// whole agent rewrote every running TI's row for each start, about 30
// rows per TI for an agent of 32 slots (docs/performance.md).
func (a *Agent) heartbeat(ctx context.Context, covers uint64) {
	a.hbMu.Lock()
	defer a.hbMu.Unlock()
	if covers != 0 && a.hbCovered >= covers {
		return
	}
	a.mu.Lock()
	since := a.hbCovered
	a.hbCovered = a.startGen
	if a.st.state != stateUp {
		// Buffered: the heartbeat sent after the replay supersedes it.
		if a.st.outage != nil {
			a.st.outage.heartbeats++
		}
		a.mu.Unlock()
		return
	}
	c := a.connLocked()
	var entries []protocol.HeartbeatEntry
	if covers == 0 {
		entries = a.heartbeatEntriesLocked(false)
	} else {
		entries = a.startedSinceLocked(since)
	}
	a.mu.Unlock()
	if covers != 0 && len(entries) == 0 {
		return // every start since was waived: the completions carry them
	}
	if err := a.postHeartbeat(ctx, c, entries); err != nil && ctx.Err() == nil {
		a.linkFailed(c, err)
	}
}

// heartbeatEntriesLocked lists the running attempts, the ended ones whose
// completion is on its way (a.reporting) and, with pending, the attempts
// whose completion is buffered (they did start), each once. An ended
// attempt stays listed until the server has its completion: dropped at
// the exit, its TI's heartbeat stamp would age while the agent is alive
// and its completion waits for the log flush or a slow database, and the
// agent-lost reaper would fail it (the second 1,000-fault chaos run did,
// docs/reliability.md).
//
// Each started attempt it lists is marked sent: the heartbeat built from
// the list carries its start, so waiveStartReport leaves it to that one.
func (a *Agent) heartbeatEntriesLocked(pending bool) []protocol.HeartbeatEntry {
	out := make([]protocol.HeartbeatEntry, 0, len(a.attempts)+len(a.reporting))
	for _, att := range a.attempts {
		out = append(out, protocol.HeartbeatEntry{Attempt: att.task.Attempt, Started: att.started})
		att.startSent = att.startSent || att.started
	}
	listed := func(id string) bool {
		return slices.ContainsFunc(out, func(e protocol.HeartbeatEntry) bool { return e.AttemptID == id })
	}
	for _, e := range a.reporting {
		if !listed(e.AttemptID) {
			out = append(out, e)
		}
	}
	if pending {
		buffered, _ := a.events.Peek(a.events.Len())
		for _, pc := range buffered {
			if !listed(pc.req.AttemptID) {
				out = append(out, protocol.HeartbeatEntry{Attempt: pc.req.Attempt, Started: true})
			}
		}
	}
	return out
}

// startedSinceLocked lists the attempts whose process started (or failed
// to) after start number since, all marked Started, but those whose start
// the completion reports (waiveStartReport), and marks them sent.
func (a *Agent) startedSinceLocked(since uint64) []protocol.HeartbeatEntry {
	var out []protocol.HeartbeatEntry
	for _, att := range a.attempts {
		if att.started && att.startGen > since && !att.startWaived {
			out = append(out, protocol.HeartbeatEntry{Attempt: att.task.Attempt, Started: true})
			att.startSent = true
		}
	}
	return out
}

// postHeartbeat sends entries and carries out the reply's stop orders. It
// returns only errors that need a reconnect; a rejection (401, 403, other
// 4xx) is logged: that heartbeat is lost and the next one retries.
func (a *Agent) postHeartbeat(ctx context.Context, c conn, entries []protocol.HeartbeatEntry) error {
	var resp protocol.HeartbeatResponse
	url := fmt.Sprintf("%s/v1/agents/%d/heartbeat", c.base, c.agentID)
	err := a.cl.post(ctx, "heartbeat", url, a.timeout(), protocol.HeartbeatRequest{Entries: entries}, &resp)
	if needsReconnect(err) {
		return err
	}
	if err != nil {
		a.log.Error("heartbeat rejected", "entries", len(entries), "err", err)
		return nil
	}
	if a.log.Enabled(ctx, slog.LevelDebug) {
		// The evidence a reaper must respect: from server_time (the
		// database clock of the transaction that stamped them), these
		// attempts may not be reaped for the agent-lost threshold. The
		// chaos checker reads this line (chaos/collect.go, invariant 1).
		a.log.Debug(HeartbeatAckMsg, "server_time", resp.ServerTime, "attempts", ackedAttempts(entries, resp.Stop),
			"stop", len(resp.Stop))
	}
	for _, order := range resp.Stop {
		a.stopOrder(order, "heartbeat")
	}
	return nil
}

// HeartbeatAckMsg is the debug log message of an acknowledged heartbeat,
// with its server_time and the ids of the attempts it refreshed.
const HeartbeatAckMsg = "heartbeat acknowledged"

// ackedAttempts is the attempt ids of entries the server refreshed: every
// listed attempt but those it ordered stopped (store.Heartbeat stamps all
// the others in the same transaction).
func ackedAttempts(entries []protocol.HeartbeatEntry, stops []protocol.StopOrder) []string {
	stopped := make(map[string]bool, len(stops))
	for _, s := range stops {
		stopped[s.AttemptID] = true
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if !stopped[e.AttemptID] {
			out = append(out, e.AttemptID)
		}
	}
	return out
}

// stopOrder kills the process group of an attempt the control plane no
// longer wants (reaped, cancelled, superseded). No completion is sent for
// a reaped or superseded one afterwards: the server has moved on
// (docs/design.md §4). A cancelled one's completion reports when its last
// process ended, the TI's and run's end time. An attempt whose process
// already exited keeps its completion, and so does one whose process
// exits 0 on its own before the kill lands; the server judges it.
func (a *Agent) stopOrder(order protocol.StopOrder, source string) {
	a.mu.Lock()
	att := a.attempts[order.AttemptID]
	a.mu.Unlock()
	if att == nil || att.task.TIID != order.TIID {
		a.log.Debug("stop order for an attempt not running here", "ti_id", order.TIID,
			"attempt_id", order.AttemptID, "reason", order.Reason, "source", source)
		return
	}
	if !a.kill(att, causeStop, string(order.Reason)) {
		return
	}
	after := "no completion will be sent"
	if order.Reason == state.StopCancelled {
		after = "its end will be reported"
	}
	att.log.Warn("stopping attempt on control plane order; "+after, "reason", order.Reason, "source", source)
	a.systemLine(att, fmt.Sprintf("--- stopped by the control plane (%s): killing process group ---", order.Reason))
}

// stopWatchLoop keeps one stop watch open while the link is up (POST
// /v1/agents/{id}/stops, a long poll): when the server says a TI this
// agent holds was cancelled, it wakes the heartbeat, whose reply carries
// the stop order, so a cancel stops the work within a moment instead of
// at the next heartbeat. Errors back off and retry; the heartbeat still
// carries every stop order, so a server without the route only makes
// stops slower.
func (a *Agent) stopWatchLoop(ctx context.Context) {
	bo := a.newBackoff()
	for {
		c, err := a.waitUp(ctx)
		if err != nil {
			return
		}
		var resp protocol.StopWatchResponse
		url := fmt.Sprintf("%s/v1/agents/%d/stops", c.base, c.agentID)
		err = a.cl.post(ctx, "stop watch", url, a.cfg.ClaimWait+a.timeout(),
			protocol.StopWatchRequest{Wait: protocol.Duration(a.cfg.ClaimWait)}, &resp)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			a.log.Debug("stop watch failed", "err", err)
			if !sleepCtx(ctx, bo.Next()) {
				return
			}
			continue
		}
		bo.Reset()
		if resp.Stop {
			signal(a.wakeHeartbeat)
		}
	}
}

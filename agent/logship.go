package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
)

// addLog gives the line the next Seq of its attempt and queues it. The Seq
// and the agent's timestamp are fixed here, at capture, so replays keep
// them (docs/design.md §4 logs).
//
// While the agent is connected (registered, up or replaying) and the queue
// is full, addLog waits for room: the task's output splitter stops reading
// the pipe, and a task that keeps printing blocks on its write until the
// control plane has taken its lines. A loud task is slowed to the server's
// pace, never cut (issue 23). Disconnected, the agent does not wait (the
// task keeps running through an outage) and the queue drops its oldest
// line instead, counted in the outage's gap marker.
//
// Every line of an attempt passes here, so this is where its secret
// values are masked, before anything queues, spools or ships the line.
func (a *Agent) addLog(att *attempt, stream, text string) {
	if att.mask != nil {
		text = att.mask.Replace(text) // the one point every line of the attempt passes
	}
	now := a.wallNow()
	a.mu.Lock()
	for a.logs.Full() && a.st.state != stateDown && !a.logsClosed {
		signal(a.wakeShip)
		a.logRoom.Wait()
	}
	if a.logs.Full() {
		a.startOutageLocked() // a line is about to drop: a gap marker must count it
	}
	att.seq++
	a.logs.Push(protocol.LogLine{Attempt: att.task.Attempt, Seq: att.seq, Stream: stream, Time: now, Line: text})
	full := a.logs.Len() >= shipBatchLines && a.st.state == stateUp
	a.mu.Unlock()
	if full {
		signal(a.wakeShip)
	}
}

// systemLine writes an agent-authored line into the attempt's log.
func (a *Agent) systemLine(att *attempt, text string) {
	a.addLog(att, protocol.StreamSystem, text)
}

// shipLoop sends queued log lines every shipInterval, or sooner when a full
// batch is waiting. It ships only while the link is up; otherwise lines
// wait in the ring for the replay.
func (a *Agent) shipLoop(ctx context.Context) {
	t := time.NewTicker(a.shipInterval)
	defer t.Stop()
	var s shipper
	defer func() {
		a.mu.Lock()
		a.logsClosed = true // nothing ships any more: let blocked tasks through
		a.logRoom.Broadcast()
		a.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.wakeShip:
		}
		for {
			remaining, ok := a.shipOnce(ctx, &s)
			if !ok || remaining < shipBatchLines {
				break
			}
		}
	}
}

// shipper is shipLoop's own state.
type shipper struct {
	goneAt      uint64 // 1 + first index of a batch already refused with 404
	dropsLogged uint64 // ring drops already reported
}

// shipOnce sends one batch of up to shipBatchLines lines. It reports the
// lines still queued and whether it shipped (or dropped) a batch.
func (a *Agent) shipOnce(ctx context.Context, s *shipper) (remaining int, ok bool) {
	a.mu.Lock()
	if a.st.state != stateUp {
		a.mu.Unlock()
		return 0, false
	}
	c := a.connLocked()
	batch, first := a.logs.Next(shipBatchLines)
	dropsBefore := a.events.Dropped() + a.logs.Dropped()
	a.logRoom.Broadcast() // the batch left the ring
	a.mu.Unlock()
	if len(batch) == 0 {
		return 0, false
	}
	url := fmt.Sprintf("%s/v1/agents/%d/logs", c.base, c.agentID)
	err := a.cl.post(ctx, "logs", url, a.timeout(), protocol.LogsRequest{Lines: batch}, nil)
	if err != nil {
		if ctx.Err() != nil {
			return 0, false
		}
		// A forgotten agent re-registers and retries the batch once; a
		// second 404 for the same batch means the lines are unwanted.
		retry := isTransient(err) || (isAgentGone(err) && s.goneAt != first+1)
		if retry {
			if isAgentGone(err) {
				s.goneAt = first + 1
			}
			a.batchFailed(c, err, dropsBefore)
			return 0, false
		}
		a.log.Error("log batch rejected; dropped", "lines", len(batch), "err", err)
	}
	a.mu.Lock()
	a.ackLinesLocked(len(batch))
	remaining, dropped := a.logs.Len(), a.logs.Dropped()
	a.mu.Unlock()
	if dropped > s.dropsLogged {
		a.log.Warn("log buffer overflowed: oldest lines dropped", "dropped", dropped-s.dropsLogged,
			"log_buffer_size", a.cfg.LogBufferSize)
		s.dropsLogged = dropped
	}
	return remaining, true
}

// ackLinesLocked removes the first n held lines, which the server has
// (or refused for good), and wakes those waiting on shipping.
func (a *Agent) ackLinesLocked(n int) {
	a.logs.Ack(n)
	close(a.shipped)
	a.shipped = make(chan struct{})
	a.logRoom.Broadcast()
}

// shipBefore ships, during a replay, the queued lines whose index is below
// end: those captured before the outage began. They sort before the
// outage's gap markers (their Seqs are lower), so they are stored first and
// a reader following by Seq never has a line land behind its cursor. A
// failure that needs a reconnect takes the link down and is returned.
func (a *Agent) shipBefore(ctx context.Context, c conn, end uint64) error {
	url := fmt.Sprintf("%s/v1/agents/%d/logs", c.base, c.agentID)
	for {
		a.mu.Lock()
		batch, _ := a.logs.NextBefore(shipBatchLines, end)
		a.logRoom.Broadcast()
		a.mu.Unlock()
		if len(batch) == 0 {
			return nil
		}
		err := a.cl.post(ctx, "logs", url, a.timeout(), protocol.LogsRequest{Lines: batch}, nil)
		if err != nil && needsReconnect(err) {
			a.linkFailed(c, err)
			return err
		}
		if err != nil {
			a.log.Error("log batch rejected; dropped", "lines", len(batch), "err", err)
		}
		a.mu.Lock()
		a.ackLinesLocked(len(batch))
		a.mu.Unlock()
	}
}

// batchFailed takes the link down after a log batch failed with err. Lines
// that fell out of the ring while the batch was in flight were lost to the
// outage this failure opens, though it is noticed only now: the gap marker
// counts them (dropsBefore is the drop total when the batch was taken).
func (a *Agent) batchFailed(c conn, err error, dropsBefore uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.markDownLocked(c.gen, err) {
		return
	}
	if o := a.st.outage; o != nil && !o.markersSent {
		o.dropBase = min(o.dropBase, dropsBefore)
	}
}

// awaitShipped waits until the log lines below ring index end have been
// shipped (or dropped), the link is not up, or a request timeout passed
// without a batch shipped: a long backlog that drains at the server's pace
// is waited for, a stalled one is not.
func (a *Agent) awaitShipped(ctx context.Context, end uint64) {
	timer := time.NewTimer(a.timeout())
	defer timer.Stop()
	for first := true; ; first = false {
		if !first {
			timer.Reset(a.timeout())
		}
		a.mu.Lock()
		done := a.logs.Head() >= end || a.st.state != stateUp
		ch := a.shipped
		a.mu.Unlock()
		if done {
			return
		}
		signal(a.wakeShip)
		select {
		case <-ch:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

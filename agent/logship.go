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
func (a *Agent) addLog(att *attempt, stream, text string) {
	now := time.Now()
	a.mu.Lock()
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
	a.logs.Ack(len(batch))
	remaining, dropped := a.logs.Len(), a.logs.Dropped()
	close(a.shipped)
	a.shipped = make(chan struct{})
	a.mu.Unlock()
	if dropped > s.dropsLogged {
		a.log.Warn("log buffer overflowed: oldest lines dropped", "dropped", dropped-s.dropsLogged,
			"log_buffer_size", a.cfg.LogBufferSize)
		s.dropsLogged = dropped
	}
	return remaining, true
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
// shipped (or dropped), the link is not up, or a request timeout passed.
func (a *Agent) awaitShipped(ctx context.Context, end uint64) {
	timer := time.NewTimer(a.timeout())
	defer timer.Stop()
	for {
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

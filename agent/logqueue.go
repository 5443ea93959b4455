package agent

import (
	"iter"
	"math"

	"github.com/vigil-sched/vigil/api/protocol"
)

// logQueue holds the log lines the control plane has not acknowledged
// (docs/design.md §4 logs). New lines wait in a ring of Config.LogBufferSize
// lines that drops its oldest when full. A line taken for sending moves to
// held, which drops nothing, until the server acknowledges it; so a dropped
// line is always one the server never saw:
//   - a batch whose reply was lost is sent again, and the server ignores
//     the lines it already has (by attempt and seq) instead of the agent
//     counting them dropped as well;
//   - the lines a gap marker announces as replayed are all delivered,
//     however much the task prints before they are.
//
// held is bounded: one sent batch (shipBatchLines) plus one ring's worth
// of announced lines, so the queue holds at most 2 × LogBufferSize +
// shipBatchLines lines. Every line keeps the absolute ring index it got
// when pushed. The ring only drops while the agent is disconnected:
// while connected, the agent waits for Full to clear before it pushes
// (backpressure on the task's output). Drops are also counted per
// attempt until a gap marker reports them (Unreported, Reported). A
// logQueue is not safe for concurrent use.
type logQueue struct {
	ring       *ring[protocol.LogLine]
	held       []heldLine // oldest first
	sent       int        // held[:sent] went out at least once
	limit      int
	trimmed    uint64            // announced lines dropped by a later Announce
	unreported map[string]uint64 // by attempt id: drops no marker has reported yet
}

type heldLine struct {
	idx  uint64 // ring index
	line protocol.LogLine
}

func newLogQueue(limit int) *logQueue {
	r := newRing[protocol.LogLine](limit)
	return &logQueue{ring: r, limit: r.limit, unreported: map[string]uint64{}}
}

// Push queues l, dropping the oldest waiting line when the ring is full.
func (q *logQueue) Push(l protocol.LogLine) {
	if old, evicted := q.ring.Push(l); evicted {
		q.unreported[old.AttemptID]++
	}
}

// Full reports whether the next Push would drop a line.
func (q *logQueue) Full() bool { return q.ring.Len() >= q.limit }

// Unreported is how many lines of attempt id were dropped since the last
// Reported for it: the count its next gap marker carries.
func (q *logQueue) Unreported(id string) uint64 { return q.unreported[id] }

// Reported records that a delivered gap marker counted n of attempt id's
// dropped lines.
func (q *logQueue) Reported(id string, n uint64) {
	if left := q.unreported[id] - min(n, q.unreported[id]); left > 0 {
		q.unreported[id] = left
	} else {
		delete(q.unreported, id)
	}
}

// Len is the number of lines not yet acknowledged.
func (q *logQueue) Len() int { return len(q.held) + q.ring.Len() }

// Dropped is the total number of lines dropped unsent.
func (q *logQueue) Dropped() uint64 { return q.ring.Dropped() + q.trimmed }

// End is the index the next pushed line will get.
func (q *logQueue) End() uint64 { return q.ring.End() }

// Head is the index of the oldest line not yet acknowledged (End when
// none): every line below it was acknowledged or dropped.
func (q *logQueue) Head() uint64 {
	if len(q.held) > 0 {
		return q.held[0].idx
	}
	return q.ring.Head()
}

// All yields the unacknowledged lines in capture order.
func (q *logQueue) All() iter.Seq[protocol.LogLine] {
	return func(yield func(protocol.LogLine) bool) {
		for _, h := range q.held {
			if !yield(h.line) {
				return
			}
		}
		for l := range q.ring.All() {
			if !yield(l) {
				return
			}
		}
	}
}

// Next returns the next batch to send, at most size lines, and the index
// of its first line: the held lines first, else lines taken from the ring.
// The batch stays held until Ack.
func (q *logQueue) Next(size int) (batch []protocol.LogLine, first uint64) {
	return q.NextBefore(size, math.MaxUint64)
}

// NextBefore is Next limited to the lines whose index is below end: a
// replay ships the lines captured before an outage began ahead of the
// outage's gap markers, so that lines are stored in Seq order.
func (q *logQueue) NextBefore(size int, end uint64) (batch []protocol.LogLine, first uint64) {
	if len(q.held) == 0 && end > q.ring.Head() {
		q.take(int(min(uint64(size), end-q.ring.Head())))
	}
	n, bytes := 0, 0
	for n < min(size, len(q.held)) && q.held[n].idx < end {
		if b := len(q.held[n].line.Line); n == 0 || bytes+b <= shipMaxBytes {
			n, bytes = n+1, bytes+b
			continue
		}
		break
	}
	batch = make([]protocol.LogLine, n)
	for i, h := range q.held[:n] {
		batch[i] = h.line
	}
	q.sent = max(q.sent, n)
	return batch, q.Head()
}

// Ack removes the first n held lines: the server has them, or refused
// them for good.
func (q *logQueue) Ack(n int) {
	clear(q.held[:n]) // release the lines for the GC
	q.held = q.held[n:]
	q.sent = max(q.sent-n, 0)
	if len(q.held) == 0 {
		q.held = nil
	}
}

// Announce moves every waiting line into held, for a gap marker that
// counts them as replayed, and returns how many lines that marker must
// count. Lines an earlier, undelivered marker announced are dropped
// oldest first beyond one ring's worth (sent lines never are), so the
// bound holds however often a replay fails.
func (q *logQueue) Announce() int {
	q.take(q.ring.Len())
	if excess := len(q.held) - q.sent - q.limit; excess > 0 {
		for _, h := range q.held[q.sent : q.sent+excess] {
			q.unreported[h.line.AttemptID]++
		}
		clear(q.held[q.sent : q.sent+excess])
		q.held = append(q.held[:q.sent], q.held[q.sent+excess:]...)
		q.trimmed += uint64(excess)
	}
	return q.Len()
}

// take moves up to k of the oldest waiting lines into held, at most
// shipMaxBytes of text (one line at least).
func (q *logQueue) take(k int) {
	batch, first := q.ring.Peek(k)
	for i, bytes := 0, 0; i < len(batch); i++ {
		if bytes += len(batch[i].Line); i > 0 && bytes > shipMaxBytes {
			batch = batch[:i]
		}
	}
	for i, l := range batch {
		q.held = append(q.held, heldLine{idx: first + uint64(i), line: l})
	}
	q.ring.DiscardBefore(first + uint64(len(batch)))
}

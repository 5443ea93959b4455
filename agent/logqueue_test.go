package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

func pushLines(q *logQueue, from, to int) {
	for i := from; i <= to; i++ {
		q.Push(protocol.LogLine{Seq: int64(i), Line: fmt.Sprint(i)})
	}
}

func seqs(lines []protocol.LogLine) []int64 {
	out := make([]int64, len(lines))
	for i, l := range lines {
		out[i] = l.Seq
	}
	return out
}

// A sent batch is never dropped, however much is pushed before its reply.
func TestLogQueueKeepsSentBatch(t *testing.T) {
	t.Parallel()
	q := newLogQueue(3)
	pushLines(q, 1, 2)
	batch, first := q.Next(10)
	assert.Equal(t, []int64{1, 2}, seqs(batch))
	assert.Equal(t, uint64(0), first)
	pushLines(q, 3, 7) // 3 and 4 fall out of the ring, 1 and 2 are held
	assert.Equal(t, uint64(2), q.Dropped())
	assert.Equal(t, 5, q.Len())
	assert.Equal(t, uint64(0), q.Head())
	again, _ := q.Next(10) // the reply was lost: the same batch again
	assert.Equal(t, []int64{1, 2}, seqs(again))
	q.Ack(len(again))
	assert.Equal(t, uint64(4), q.Head(), "0..1 acknowledged, 2..3 dropped")
	rest, first := q.Next(10)
	assert.Equal(t, []int64{5, 6, 7}, seqs(rest))
	assert.Equal(t, uint64(4), first)
	q.Ack(len(rest))
	assert.Equal(t, 0, q.Len())
	assert.Equal(t, q.End(), q.Head())
}

// Announced lines survive later pushes; a replay that fails again and
// announces again keeps the newest ring's worth of unsent lines, never
// a sent one, and counts what it trims.
func TestLogQueueAnnounceBound(t *testing.T) {
	t.Parallel()
	q := newLogQueue(3)
	pushLines(q, 1, 1)
	_, _ = q.Next(10) // line 1 sent, reply lost
	pushLines(q, 2, 4)
	assert.Equal(t, 4, q.Announce())
	pushLines(q, 5, 7) // the ring takes 3 more; nothing announced falls out
	assert.Equal(t, uint64(0), q.Dropped())
	assert.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7}, seqs(queued(q)))

	assert.Equal(t, 4, q.Announce(), "the marker failed: announce again")
	assert.Equal(t, uint64(3), q.Dropped(), "2, 3 and 4 trimmed, oldest first")
	assert.Equal(t, []int64{1, 5, 6, 7}, seqs(queued(q)))
	batch, first := q.Next(2)
	assert.Equal(t, []int64{1, 5}, seqs(batch))
	assert.Equal(t, uint64(0), first)
	q.Ack(2)
	require.Equal(t, 2, q.Len())
	assert.Equal(t, uint64(5), q.Head())
}

func queued(q *logQueue) []protocol.LogLine {
	var out []protocol.LogLine
	for l := range q.All() {
		out = append(out, l)
	}
	return out
}

// Drops are counted per attempt, by eviction and by an announce trim,
// until a marker reports them; Full says when the next push would drop.
func TestLogQueueCountsDropsPerAttempt(t *testing.T) {
	t.Parallel()
	q := newLogQueue(2)
	push := func(id string, seq int) {
		q.Push(protocol.LogLine{Attempt: protocol.Attempt{AttemptID: id}, Seq: int64(seq)})
	}
	push("a", 1)
	assert.False(t, q.Full())
	push("b", 1)
	assert.True(t, q.Full(), "two lines in a 2-line ring")
	push("b", 2) // evicts a/1
	push("b", 3) // evicts b/1
	assert.Equal(t, uint64(1), q.Unreported("a"))
	assert.Equal(t, uint64(1), q.Unreported("b"))
	_, _ = q.Next(1) // b/2 sent, its reply lost
	assert.False(t, q.Full(), "a line taken for sending leaves the ring")
	push("a", 2)
	assert.Equal(t, 3, q.Announce())
	push("a", 3)
	push("a", 4)
	assert.Equal(t, 3, q.Announce(), "the marker failed: announce again, trimming b/3 and a/2")
	assert.Equal(t, uint64(2), q.Unreported("a"))
	assert.Equal(t, uint64(2), q.Unreported("b"))
	q.Reported("a", 2)
	q.Reported("b", 1)
	assert.Equal(t, uint64(0), q.Unreported("a"))
	assert.Equal(t, uint64(1), q.Unreported("b"), "what a marker did not count stays for the next")
	assert.Equal(t, q.Dropped(), uint64(4), "the agent-wide total is unchanged")
}

// NextBefore ships only the lines below its bound, held ones first, so a
// replay can send what preceded an outage ahead of its markers.
func TestLogQueueNextBefore(t *testing.T) {
	t.Parallel()
	q := newLogQueue(10)
	pushLines(q, 1, 3)
	_, _ = q.Next(2) // 1 and 2 held, reply lost
	end := q.End()   // the outage begins: 1..3 precede its markers
	pushLines(q, 4, 6)
	batch, first := q.NextBefore(10, end)
	assert.Equal(t, []int64{1, 2}, seqs(batch), "the held lines first, alone")
	assert.Equal(t, uint64(0), first)
	q.Ack(2)
	batch, _ = q.NextBefore(10, end)
	assert.Equal(t, []int64{3}, seqs(batch), "then the rest below the bound")
	q.Ack(1)
	batch, _ = q.NextBefore(10, end)
	assert.Empty(t, batch, "nothing captured after the outage began")
	batch, _ = q.Next(10)
	assert.Equal(t, []int64{4, 5, 6}, seqs(batch))
}

// A batch carries at most shipMaxBytes of text, and always one line.
func TestLogQueueBatchBytes(t *testing.T) {
	t.Parallel()
	q := newLogQueue(10)
	big := strings.Repeat("x", shipMaxBytes/2+1)
	for i := 1; i <= 3; i++ {
		q.Push(protocol.LogLine{Seq: int64(i), Line: big})
	}
	q.Push(protocol.LogLine{Seq: 4, Line: strings.Repeat("y", shipMaxBytes+1)})
	for _, want := range [][]int64{{1}, {2}, {3}, {4}} {
		batch, _ := q.Next(10)
		assert.Equal(t, want, seqs(batch), "two halves and a byte are over the cap; one line too long still goes")
		q.Ack(len(batch))
	}
	pushLines(q, 5, 7)
	batch, _ := q.Next(10)
	assert.Equal(t, []int64{5, 6, 7}, seqs(batch), "short lines: the line count rules")
}

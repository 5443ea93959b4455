package agent

import (
	"fmt"
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

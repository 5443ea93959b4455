package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// TestLoudTaskKeepsEveryLineWhileConnected runs a task that prints far
// more lines, as fast as it can, than a 10-line buffer holds: while the
// agent is connected it slows the task to the server's pace instead of
// dropping, so every line arrives once, with contiguous Seqs and no gap
// marker (issue 23).
func TestLoudTaskKeepsEveryLineWhileConnected(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, func(c *Config) { c.LogBufferSize = 10 })
	const n = 5000
	task := f.enqueue(0, nil, "seq", "1", fmt.Sprint(n))
	c := f.waitCompletion(task.AttemptID, 30*time.Second)
	require.Equal(t, state.OutcomeSuccess, c.Outcome)
	var lines []protocol.LogLine
	require.Eventually(t, func() bool {
		lines = f.lines(task.AttemptID)
		return len(lines) >= n
	}, 10*time.Second, 10*time.Millisecond, "every line stored")
	require.Len(t, lines, n, "no marker, no extra line")
	for i, l := range lines {
		require.Equal(t, int64(i+1), l.Seq, "contiguous seqs")
		require.Equal(t, fmt.Sprint(i+1), l.Line)
	}
}

// TestReplayStoresEarlierLinesBeforeTheMarker fails the batch carrying
// lines 1..3 (the server stores none of it), so the outage begins with
// them queued; the task prints 4 and 5 during it. The replay must store
// 1..3 before the gap marker (Seq 4): lines arrive in Seq order, so a
// reader following by Seq never has one land behind its cursor.
func TestReplayStoresEarlierLinesBeforeTheMarker(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	a, task, p := startPrinter(t, f, 50)
	f.setLogsHook(nil)
	f.failLogsWith(func(lines []protocol.LogLine) bool {
		if hasLine(lines, "line 3") {
			f.setModeLocked(mode503)
			return true
		}
		return false
	})
	p.print(3)
	require.Eventually(t, a.linkDown, 5*time.Second, 5*time.Millisecond)
	p.print(2)
	f.failLogsWith(nil)
	f.setMode(modeUp)

	lines := finishPrinter(t, f, a, task, p)
	require.Len(t, lines, 6)
	m := markerLine(t, lines)
	arrived := f.arrivals(task.AttemptID)
	var order []int64
	for _, l := range arrived {
		order = append(order, l.Seq)
	}
	assert.Equal(t, []int64{1, 2, 3, m.Seq, m.Seq + 1, m.Seq + 2}, order, "stored in Seq order, each once")
	assert.Equal(t, int64(4), m.Seq)
}

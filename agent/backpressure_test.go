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

// TestDropWithoutOutageOpensOne: a line about to drop while the link is
// down for a reason that opened no outage (the server forgot the agent),
// or after the outage's markers went out, opens a new outage, so a gap
// marker is reserved ahead of it to count the loss.
func TestDropWithoutOutageOpensOne(t *testing.T) {
	t.Parallel()
	a, err := New(Config{Servers: []string{"http://127.0.0.1:1"}, LogBufferSize: 2})
	require.NoError(t, err)
	att := &attempt{task: protocol.ClaimedTask{Attempt: protocol.Attempt{TIID: 1, AttemptID: "live"}}, log: a.log}
	a.attempts["live"] = att
	a.mu.Lock()
	a.st.gen = 1 // registered once, now down without an outage
	a.mu.Unlock()
	a.addLog(att, protocol.StreamStdout, "1")
	a.addLog(att, protocol.StreamStdout, "2")
	a.mu.Lock()
	require.Nil(t, a.st.outage, "nothing dropped yet")
	a.mu.Unlock()
	a.addLog(att, protocol.StreamStdout, "3") // drops line 1
	a.mu.Lock()
	defer a.mu.Unlock()
	require.NotNil(t, a.st.outage)
	require.Len(t, a.st.outage.markers, 1)
	assert.Equal(t, int64(3), a.st.outage.markers[0].Seq, "the marker sorts before the line that pushed one out")
	assert.Equal(t, int64(4), att.seq)
	assert.Equal(t, uint64(1), a.logs.Unreported("live"))

	a.st.outage.markersSent = true // its replay then failed after the markers
	a.mu.Unlock()
	a.addLog(att, protocol.StreamStdout, "4")
	a.mu.Lock()
	require.Len(t, a.st.outage.markers, 1, "a new outage, with its own marker")
	assert.False(t, a.st.outage.markersSent)
	assert.Equal(t, int64(5), a.st.outage.markers[0].Seq)
}

package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// The log continuity promise (docs/design.md §4 logs): lines stored + the
// dropped count of the gap markers = lines printed. These tests print from
// the test itself (addLog, as the task's stdout splitter does) so hooks in
// the fake control plane decide exactly which lines exist when a request
// is in flight.

// TestGapMarkerCountsLinesPrintedDuringReplay prints while the gap marker
// is in flight: the marker has already announced the buffered lines, so
// the new ones must not push any of those out of a full buffer unseen.
func TestGapMarkerCountsLinesPrintedDuringReplay(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	a, task, p := startPrinter(t, f, 5)

	f.setMode(mode503)
	require.Eventually(t, a.linkDown, 2*time.Second, 5*time.Millisecond)
	p.print(8) // a 5-line buffer keeps 4..8 and drops 1..3
	var once sync.Once
	f.setLogsHook(func(lines []protocol.LogLine) bool {
		if len(lines) > 0 && gapMarkerRE.MatchString(lines[0].Line) {
			once.Do(func() { p.print(2) }) // printed after the counts were fixed
		}
		return false
	})
	f.setMode(modeUp)

	lines := finishPrinter(t, f, a, task, p)
	m := checkLogAccount(t, lines, p.n())
	assert.Equal(t, "5", m[3], "the marker announces the full buffer")
	assert.Equal(t, "3", m[4], "lines 1..3 fell out during the outage")
	assert.Equal(t, int64(3), markerLine(t, lines).Dropped, "the attempt's own count")
}

// TestLostLogReplyIsNotCountedDropped stores a batch but loses its reply,
// then overflows the buffer during the outage that follows: the agent
// cannot know the batch landed, so it must send it again (the server
// ignores the duplicate) rather than count it as dropped as well.
func TestLostLogReplyIsNotCountedDropped(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	a, task, p := startPrinter(t, f, 5)

	loseReplyToLine3(t, f, a, p, func() {})
	p.print(8) // eight lines into a 5-line buffer
	f.setMode(modeUp)

	lines := finishPrinter(t, f, a, task, p)
	m := checkLogAccount(t, lines, p.n())
	assert.Equal(t, "3", m[4], "only lines printed during the outage fell out")
}

// TestLinesDroppedWhileFailingBatchInFlightAreCounted overflows the buffer
// while a batch is in flight that then fails: the outage is noticed only
// when it fails, but the lines that fell out meanwhile are its loss too.
func TestLinesDroppedWhileFailingBatchInFlightAreCounted(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	a, task, p := startPrinter(t, f, 5)

	printed := make(chan struct{})
	loseReplyToLine3(t, f, a, p, func() {
		// Eight lines into a 5-line buffer before the agent knows: the
		// connected agent takes five and holds the printer back (it
		// must not wait for it here, in the server, or nothing ends);
		// once the failure takes the link down the rest push the oldest
		// out.
		go func() { p.print(8); close(printed) }()
	})
	<-printed
	f.setMode(modeUp)

	lines := finishPrinter(t, f, a, task, p)
	m := checkLogAccount(t, lines, p.n())
	assert.Equal(t, "3", m[4], "the lines that fell out before the failure was seen")
}

// markerLine is the one gap marker among lines.
func markerLine(t *testing.T, lines []protocol.LogLine) protocol.LogLine {
	t.Helper()
	i := slices.IndexFunc(lines, func(l protocol.LogLine) bool { return gapMarkerRE.MatchString(l.Line) })
	require.GreaterOrEqual(t, i, 0, "a gap marker")
	return lines[i]
}

// loseReplyToLine3 prints lines 1..3 and has the control plane store the
// batch that carries line 3 but go down (503) instead of replying; inFlight
// runs while that batch is unanswered. It returns once the agent noticed.
func loseReplyToLine3(t *testing.T, f *fakeAPI, a *testAgent, p *printer, inFlight func()) {
	t.Helper()
	var lost atomic.Bool
	f.setLogsHook(func(lines []protocol.LogLine) bool {
		if !hasLine(lines, "line 3") || !lost.CompareAndSwap(false, true) {
			return false
		}
		f.setMode(mode503)
		inFlight()
		return true
	})
	p.print(3)
	require.Eventually(t, lost.Load, 5*time.Second, 5*time.Millisecond)
	require.Eventually(t, a.linkDown, 2*time.Second, 5*time.Millisecond)
}

func hasLine(lines []protocol.LogLine, text string) bool {
	return slices.ContainsFunc(lines, func(l protocol.LogLine) bool { return l.Line == text })
}

// printer writes numbered stdout lines into a live attempt's log.
type printer struct {
	a   *testAgent
	att *attempt
	mu  sync.Mutex
	cnt int
}

func (p *printer) print(k int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range k {
		p.cnt++
		p.a.addLog(p.att, protocol.StreamStdout, fmt.Sprintf("line %d", p.cnt))
	}
}

func (p *printer) n() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cnt
}

// startPrinter starts an agent with a log buffer of size lines and a task
// that runs until finishPrinter lets it end.
func startPrinter(t *testing.T, f *fakeAPI, size int) (*testAgent, protocol.ClaimedTask, *printer) {
	t.Helper()
	srv := f.serve()
	a := startAgent(t, []string{srv.URL}, func(c *Config) { c.LogBufferSize = size })
	gate := filepath.Join(t.TempDir(), "go")
	task := f.enqueue(0, map[string]string{"GATE": gate}, sh(`while [ ! -e "$GATE" ]; do sleep 0.02; done`)...)
	var att *attempt
	require.Eventually(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		att = a.attempts[task.AttemptID]
		return att != nil && f.isStarted(task.AttemptID)
	}, 5*time.Second, 10*time.Millisecond)
	return a, task, &printer{a: a, att: att}
}

// finishPrinter ends the task and returns its lines once the agent has
// nothing left to ship.
func finishPrinter(t *testing.T, f *fakeAPI, a *testAgent, task protocol.ClaimedTask, p *printer) []protocol.LogLine {
	t.Helper()
	require.NoError(t, os.WriteFile(task.Env["GATE"], nil, 0o600))
	c := f.waitCompletion(task.AttemptID, 10*time.Second)
	require.Equal(t, state.OutcomeSuccess, c.Outcome)
	require.Eventually(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.logs.Len() == 0
	}, 5*time.Second, 10*time.Millisecond, "every line shipped")
	return f.lines(task.AttemptID)
}

// checkLogAccount checks the promise on an attempt's stored lines: one gap
// marker, stdout received + dropped = printed, in order, and the dropped
// lines are one run exactly as long as the count. It returns the marker's
// submatches.
func checkLogAccount(t *testing.T, lines []protocol.LogLine, printed int) []string {
	t.Helper()
	var marker []string
	var got []int
	for _, l := range lines {
		if m := gapMarkerRE.FindStringSubmatch(l.Line); m != nil {
			require.Nil(t, marker, "exactly one gap marker")
			marker = m
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(l.Line, "line "))
		require.NoError(t, err, l.Line)
		got = append(got, n)
	}
	require.NotNil(t, marker, "a gap marker")
	dropped, _ := strconv.Atoi(marker[4])
	t.Logf("gap marker: %s; received %v", marker[0], got)
	assert.Equal(t, printed, len(got)+dropped, "received + dropped = printed")
	require.True(t, slices.IsSorted(got), "stdout in seq order: %v", got)
	var missing []int
	for i, n := 0, 1; n <= printed; n++ {
		if i < len(got) && got[i] == n {
			i++
			continue
		}
		missing = append(missing, n)
	}
	assert.Len(t, missing, dropped, "the lines missing are exactly the dropped count")
	if len(missing) > 0 {
		assert.Equal(t, len(missing), missing[len(missing)-1]-missing[0]+1, "one contiguous gap: %v", missing)
	}
	return marker
}

package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

var gapMarkerRE = regexp.MustCompile(`^--- control plane unreachable for (\d+)s: replaying (\d+) buffered events and (\d+) log lines \((\d+) dropped\) ---$`)

// TestOutageKeepsTaskRunningAndReplays is the KiCI reconnection scenario:
// the control plane fails (503, or connections dropped) while a task prints
// every 100 ms; the task keeps running, and after recovery the agent has
// re-registered with the attempt and every line arrived, in seq order,
// with exactly one gap marker.
func TestOutageKeepsTaskRunningAndReplays(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{mode503, modeDrop} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			f := newFakeAPI(t)
			srv := f.serve()
			a := startAgent(t, []string{srv.URL}, nil)
			const n = 20
			task := f.enqueue(0, nil, sh(fmt.Sprintf(`i=0; while [ $i -lt %d ]; do i=$((i+1)); echo "line $i"; sleep 0.1; done`, n))...)

			require.Eventually(t, func() bool { return len(f.lines(task.AttemptID)) >= 3 }, 5*time.Second, 10*time.Millisecond)
			f.setMode(mode)
			require.Eventually(t, a.linkDown, 2*time.Second, 5*time.Millisecond)
			time.Sleep(1200 * time.Millisecond)
			assert.Equal(t, 1, a.inFlightCount(), "the task keeps running during the outage")
			f.setMode(modeUp)

			c := f.waitCompletion(task.AttemptID, 10*time.Second)
			assert.Equal(t, state.OutcomeSuccess, c.Outcome)
			regs := f.registrations()
			require.GreaterOrEqual(t, len(regs), 2)
			assert.Contains(t, regs[len(regs)-1].InFlight, protocol.HeartbeatEntry{Attempt: task.Attempt, Started: true},
				"re-register carried the in-flight attempt, started")

			var lines []protocol.LogLine
			require.Eventually(t, func() bool {
				lines = f.lines(task.AttemptID)
				return len(lines) == n+1
			}, 5*time.Second, 10*time.Millisecond, "all %d lines plus one marker", n)
			markers, next := 0, 1
			for i, l := range lines {
				assert.Equal(t, int64(i+1), l.Seq, "contiguous seqs")
				if l.Stream == protocol.StreamSystem {
					markers++
					m := gapMarkerRE.FindStringSubmatch(l.Line)
					require.NotNil(t, m, "marker text: %q", l.Line)
					assert.Equal(t, "0", m[4], "nothing dropped")
					secs, _ := strconv.Atoi(m[1])
					assert.InDelta(t, 1, secs, 1, "outage length in seconds")
					assert.Greater(t, i, 0, "lines shipped before the outage come first")
					continue
				}
				assert.Equal(t, fmt.Sprintf("line %d", next), l.Line, "stdout in seq order")
				next++
			}
			assert.Equal(t, 1, markers, "exactly one gap marker")
		})
	}
}

// TestOutageOverflowReportsExactDropCount fills a tiny log ring during an
// outage: the marker reports exactly how many lines fell out.
func TestOutageOverflowReportsExactDropCount(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	a := startAgent(t, []string{srv.URL}, func(c *Config) { c.LogBufferSize = 5 })
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	task := f.enqueue(0, map[string]string{"GATE": gate},
		sh(`while [ ! -e "$GATE" ]; do sleep 0.02; done; i=0; while [ $i -lt 20 ]; do i=$((i+1)); echo "line $i"; done`)...)
	require.Eventually(t, func() bool { return f.isStarted(task.AttemptID) }, 5*time.Second, 10*time.Millisecond)

	f.setMode(mode503)
	require.Eventually(t, a.linkDown, 2*time.Second, 5*time.Millisecond)
	require.NoError(t, os.WriteFile(gate, nil, 0o600)) // print only once the outage is noticed
	require.Eventually(t, func() bool { return a.inFlightCount() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the task finishes during the outage")
	f.setMode(modeUp)

	c := f.waitCompletion(task.AttemptID, 5*time.Second)
	assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	var lines []protocol.LogLine
	require.Eventually(t, func() bool {
		lines = f.lines(task.AttemptID)
		return len(lines) == 6
	}, 5*time.Second, 10*time.Millisecond)
	// The marker reserved seq 1 when the outage began; the 20 lines took
	// 2..21 and the ring kept the newest 5.
	assert.Equal(t, int64(1), lines[0].Seq)
	m := gapMarkerRE.FindStringSubmatch(lines[0].Line)
	require.NotNil(t, m, "marker text: %q", lines[0].Line)
	assert.Equal(t, "5", m[3], "replayed lines")
	assert.Equal(t, "15", m[4], "dropped lines")
	assert.Equal(t, int64(15), lines[0].Dropped, "the attempt's dropped lines, as a field")
	assert.NotEqual(t, "0", m[2], "the buffered completion counts as an event")
	for i, l := range lines[1:] {
		assert.Equal(t, int64(17+i), l.Seq)
		assert.Equal(t, fmt.Sprintf("line %d", 16+i), l.Line)
	}
}

// TestOutageReservesMarkerSeqs checks where gap markers sort: after the
// lines captured before the outage and before those captured during it,
// for live, finished and newly claimed attempts, and never reusing a Seq.
func TestOutageReservesMarkerSeqs(t *testing.T) {
	t.Parallel()
	a, err := New(Config{Servers: []string{"http://127.0.0.1:1"}})
	require.NoError(t, err)
	mk := func(ti int64, id string) *attempt {
		return &attempt{task: protocol.ClaimedTask{Attempt: protocol.Attempt{TIID: ti, AttemptID: id}}, log: a.log}
	}
	live, done, late := mk(1, "live"), mk(2, "done"), mk(3, "late")
	a.attempts["live"] = live
	a.addLog(live, protocol.StreamStdout, "l1") // seq 1
	a.addLog(done, protocol.StreamStdout, "d1") // seq 1, attempt already finished
	a.addLog(done, protocol.StreamStdout, "d2") // seq 2

	markers := func() map[string]int64 {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.st.gen = 1 // registered once
		a.st.outage = nil
		a.startOutageLocked()
		if _, ok := a.attempts["late"]; !ok {
			a.attempts["late"] = late
			a.reserveMarkerLocked(late) // claimed during the outage
		}
		out := map[string]int64{}
		for _, m := range a.st.outage.markers {
			out[m.AttemptID] = m.Seq
			assert.Equal(t, protocol.StreamSystem, m.Stream)
			assert.Equal(t, a.st.outage.start, m.Time)
		}
		return out
	}
	assert.Equal(t, map[string]int64{"live": 2, "done": 3, "late": 1}, markers())
	a.addLog(live, protocol.StreamStdout, "l2") // captured during the outage
	a.mu.Lock()
	assert.Equal(t, int64(3), live.seq)
	a.mu.Unlock()

	// A second outage before the finished attempt's lines were shipped.
	assert.Equal(t, map[string]int64{"live": 4, "done": 4, "late": 2}, markers())
}

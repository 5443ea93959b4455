package agent

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// An agent whose wall clock is 4 minutes behind (the chaos suite's skew,
// set here as the test build's hook sets it) stamps its log lines and its
// gap marker with that clock, and nothing else moves: the outage in the
// marker's text is measured on the monotonic clock, and the task's
// completion goes through as usual.
func TestAWallClockOffsetMovesOnlyTheLogTimes(t *testing.T) {
	t.Parallel()
	const skew = -4 * time.Minute
	f := newFakeAPI(t)
	srv := f.serve()
	a := startAgent(t, []string{srv.URL}, nil, func(a *Agent) { a.clockOffset = skew })
	task := f.enqueue(0, nil, sh(`i=0; while [ $i -lt 15 ]; do i=$((i+1)); echo "line $i"; sleep 0.1; done`)...)
	require.Eventually(t, func() bool { return len(f.lines(task.AttemptID)) >= 2 }, 5*time.Second, 10*time.Millisecond)
	f.setMode(mode503)
	require.Eventually(t, a.linkDown, 2*time.Second, 5*time.Millisecond)
	time.Sleep(1100 * time.Millisecond) // the outage's length, read back from the marker below
	f.setMode(modeUp)

	c := f.waitCompletion(task.AttemptID, 10*time.Second)
	assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	var lines []protocol.LogLine
	require.Eventually(t, func() bool { lines = f.lines(task.AttemptID); return len(lines) == 16 }, 5*time.Second, 10*time.Millisecond)
	markers := 0
	for _, l := range lines {
		assert.WithinDuration(t, time.Now().Add(skew), l.Time, 10*time.Second, "line %d carries the agent's clock", l.Seq)
		if l.Stream == protocol.StreamSystem {
			markers++
			m := gapMarkerRE.FindStringSubmatch(l.Line)
			require.NotNil(t, m, "marker text: %q", l.Line)
			secs, _ := strconv.Atoi(m[1])
			assert.InDelta(t, 1, secs, 1, "the outage's length, on the monotonic clock")
		}
	}
	assert.Equal(t, 1, markers)
}

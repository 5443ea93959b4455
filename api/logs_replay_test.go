package api_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// TestReplayedLogBatchIsStoredOnce is the server's half of the agent's
// at-least-once log delivery (docs/design.md §4 logs): a batch that was
// stored but whose reply was lost comes again, with the lines printed
// since, and every line is stored exactly once, in seq order.
func TestReplayedLogBatchIsStoredOnce(t *testing.T) {
	t.Parallel()
	h, runID, task, path := claimedForLogs(t, "replay")
	lines := func(from, to int) []protocol.LogLine { return logLines(task, from, to) }
	code, e := h.call("POST", path, agentToken, protocol.LogsRequest{Lines: lines(1, 3)}, nil)
	require.Equal(t, 204, code, e.Message)
	code, e = h.call("POST", path, agentToken, protocol.LogsRequest{Lines: lines(1, 5)}, nil) // the replay
	require.Equal(t, 204, code, e.Message)

	var got protocol.LogList
	code, e = h.call("GET", fmt.Sprintf("/v1/runs/%d/tasks/%s/logs", runID, task.TaskID), opToken, nil, &got)
	require.Equal(t, 200, code, e.Message)
	var texts []string
	for _, l := range got.Lines {
		texts = append(texts, l.Line)
	}
	assert.Equal(t, []string{"line 1", "line 2", "line 3", "line 4", "line 5"}, texts)
}

// claimedForLogs starts a harness with a one-task DAG dagID, triggers it
// and has a new agent claim the task; it returns the run, the claimed
// task and the agent's logs path.
func claimedForLogs(t *testing.T, dagID string) (h *harness, runID int64, task protocol.ClaimedTask, path string) {
	t.Helper()
	h = newHarness(t, harnessOpts{})
	h.applyDAG(wideDAG(dagID, 1, ""))
	agent := h.register(dagID+"-agent", nil, 1)
	runID = h.trigger(dagID)
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool { tasks = h.claim(agent, 1, time.Second); return len(tasks) == 1 },
		10*time.Second, 10*time.Millisecond)
	return h, runID, tasks[0], fmt.Sprintf("/v1/agents/%d/logs", agent)
}

// logLines is stdout lines from..to of task's attempt, "line N" at Seq N.
func logLines(task protocol.ClaimedTask, from, to int) []protocol.LogLine {
	var out []protocol.LogLine
	for i := from; i <= to; i++ {
		out = append(out, protocol.LogLine{Attempt: task.Attempt, Seq: int64(i), Stream: protocol.StreamStdout,
			Time: time.Now(), Line: fmt.Sprintf("line %d", i)})
	}
	return out
}

// TestLogReadsFollowTheSeq: lines are read back in seq order, and the
// cursor is (try, seq), not the row id: line 3 stored before 1 and 2 still
// comes last, and a reader after seq 2 gets line 3 only (issue 23: the
// console once re-read a line because it cursored on ids).
func TestLogReadsFollowTheSeq(t *testing.T) {
	t.Parallel()
	h, runID, task, path := claimedForLogs(t, "cursor")
	for _, batch := range [][]protocol.LogLine{logLines(task, 3, 3), logLines(task, 1, 2)} {
		code, e := h.call("POST", path, agentToken, protocol.LogsRequest{Lines: batch}, nil)
		require.Equal(t, 204, code, e.Message)
	}
	read := func(query string) []string {
		var got protocol.LogList
		code, e := h.call("GET", fmt.Sprintf("/v1/runs/%d/tasks/%s/logs%s", runID, task.TaskID, query), opToken, nil, &got)
		require.Equal(t, 200, code, e.Message)
		texts := []string{}
		for _, l := range got.Lines {
			texts = append(texts, l.Line)
		}
		return texts
	}
	assert.Equal(t, []string{"line 1", "line 2", "line 3"}, read(""))
	assert.Equal(t, []string{"line 3"}, read("?try=1&after=2"))
	assert.Equal(t, []string{"line 3"}, read("?after_try=1&after=2"))
	assert.Equal(t, []string{}, read("?after_try=2&after=0"), "past the last try")
	code, e := h.call("GET", fmt.Sprintf("/v1/runs/%d/tasks/%s/logs?after=2", runID, task.TaskID), opToken, nil, nil)
	assert.Equal(t, 400, code)
	assert.Contains(t, e.Message, "after_try", "every try: the cursor must name its try")
}

// TestGapMarkerMarksTheLogIncomplete: a gap marker's dropped count is
// stored on the marker, added once (a replayed marker is not counted
// again) to the TI's log_dropped, shown by the run and the log read, and
// counted in vigil_log_lines_dropped_total. A count on a stdout line is
// refused.
func TestGapMarkerMarksTheLogIncomplete(t *testing.T) {
	t.Parallel()
	h, runID, task, path := claimedForLogs(t, "lossy")
	marker := protocol.LogLine{Attempt: task.Attempt, Seq: 2, Stream: protocol.StreamSystem, Time: time.Now(),
		Line: "--- gap ---", Dropped: 7}
	before := testutil.ToFloat64(h.metrics.LogLinesDroppedTotal)
	for range 2 { // the second is a replay
		code, e := h.call("POST", path, agentToken, protocol.LogsRequest{Lines: append(logLines(task, 1, 1), marker)}, nil)
		require.Equal(t, 204, code, e.Message)
	}
	assert.Equal(t, 7.0, testutil.ToFloat64(h.metrics.LogLinesDroppedTotal)-before, "counted once")
	assert.Equal(t, int64(7), h.ti(runID, task.TaskID).LogDropped)
	var run protocol.RunDetail
	code, e := h.call("GET", fmt.Sprintf("/v1/runs/%d", runID), opToken, nil, &run)
	require.Equal(t, 200, code, e.Message)
	assert.Equal(t, int64(7), run.TaskInstances[0].LogDropped)
	var got protocol.LogList
	code, e = h.call("GET", fmt.Sprintf("/v1/runs/%d/tasks/%s/logs", runID, task.TaskID), opToken, nil, &got)
	require.Equal(t, 200, code, e.Message)
	assert.Equal(t, int64(7), got.LogDropped)
	require.Len(t, got.Lines, 2)
	assert.Equal(t, int64(7), got.Lines[1].Dropped)

	bad := logLines(task, 3, 3)
	bad[0].Dropped = 1
	code, e = h.call("POST", path, agentToken, protocol.LogsRequest{Lines: bad}, nil)
	assert.Equal(t, 400, code)
	assert.Contains(t, e.Message, "lines[0].dropped")
}

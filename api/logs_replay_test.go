package api_test

import (
	"fmt"
	"testing"
	"time"

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
	h := newHarness(t, harnessOpts{})
	h.applyDAG(wideDAG("replay", 1, ""))
	agent := h.register("replayer", nil, 1)
	runID := h.trigger("replay")
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool { tasks = h.claim(agent, 1, time.Second); return len(tasks) == 1 },
		10*time.Second, 10*time.Millisecond)
	lines := func(from, to int) []protocol.LogLine {
		var out []protocol.LogLine
		for i := from; i <= to; i++ {
			out = append(out, protocol.LogLine{Attempt: tasks[0].Attempt, Seq: int64(i), Stream: protocol.StreamStdout,
				Time: time.Now(), Line: fmt.Sprintf("line %d", i)})
		}
		return out
	}
	path := fmt.Sprintf("/v1/agents/%d/logs", agent)
	code, e := h.call("POST", path, agentToken, protocol.LogsRequest{Lines: lines(1, 3)}, nil)
	require.Equal(t, 204, code, e.Message)
	code, e = h.call("POST", path, agentToken, protocol.LogsRequest{Lines: lines(1, 5)}, nil) // the replay
	require.Equal(t, 204, code, e.Message)

	var got protocol.LogList
	code, e = h.call("GET", fmt.Sprintf("/v1/runs/%d/tasks/%s/logs", runID, tasks[0].TaskID), opToken, nil, &got)
	require.Equal(t, 200, code, e.Message)
	var texts []string
	for _, l := range got.Lines {
		texts = append(texts, l.Line)
	}
	assert.Equal(t, []string{"line 1", "line 2", "line 3", "line 4", "line 5"}, texts)
}

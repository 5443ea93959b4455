package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

var markerRE = regexp.MustCompile(`^--- control plane unreachable for (\d+)s: replaying (\d+) buffered events and (\d+) log lines \((\d+) dropped\) ---$`)

// KiCI log continuity, overflow case: with a 10-line buffer, an outage
// drops the oldest lines and the gap marker states exactly how many, so
// received + dropped = printed.
func TestLogBufferOverflowShowsExactDropCount(t *testing.T) {
	t.Parallel()
	const printed = 100 // one every 100 ms
	dags := t.TempDir()
	writeDAG(t, dags, "chatty", fmt.Sprintf(`
dag_id: chatty
tasks:
  - id: talk
    command:
      - sh
      - -c
      - |
        i=0
        while [ "$i" -lt %d ]; do i=$((i + 1)); echo "line $i"; sleep 0.1; done
`, printed))
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 0, Extra: shortRecovery})
	agent := startAgent(t, []string{lite.URL}, agentToken, "small-buffer", "--log-buffer-size", "10")
	agentID(t, agent, 30*time.Second)
	run, code := triggerJSON(t, lite, "chatty", false)
	require.Equal(t, 0, code)
	waitFor(t, 20*time.Second, func() bool {
		var l protocol.LogList
		return tryGetJSON(lite, fmt.Sprintf("/v1/runs/%d/tasks/talk/logs", run.ID), &l) == nil && len(l.Lines) >= 5
	}, "first lines shipped")

	lite.Stop()
	time.Sleep(5 * time.Second) // ~50 lines printed into a 10-line buffer
	lite.Restart()
	waitRunState(t, lite, run.ID, "success", 40*time.Second)

	var stdout []int
	var marker []string
	for _, l := range taskLogs(t, lite, run.ID, "talk").Lines {
		if m := markerRE.FindStringSubmatch(l.Line); m != nil {
			require.Nil(t, marker, "exactly one gap marker")
			marker = m
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(l.Line, "line "))
		require.NoError(t, err, l.Line)
		stdout = append(stdout, n)
	}
	require.NotNil(t, marker, "a gap marker")
	t.Logf("gap marker: %s", marker[0])
	replayed, _ := strconv.Atoi(marker[3])
	dropped, _ := strconv.Atoi(marker[4])
	assert.Equal(t, 10, replayed, "a full buffer is replayed")
	assert.Greater(t, dropped, 0, "the outage overflowed the buffer")
	assert.Equal(t, printed, len(stdout)+dropped, "received + dropped = printed: the count is exact")
	for i := 1; i < len(stdout); i++ {
		assert.Less(t, stdout[i-1], stdout[i], "lines stay in order")
	}
	// The dropped lines are the oldest of the outage: one contiguous gap.
	gaps := 0
	for i := 1; i < len(stdout); i++ {
		if d := stdout[i] - stdout[i-1] - 1; d > 0 {
			gaps++
			assert.Equal(t, dropped, d, "the gap is exactly the dropped count")
		}
	}
	assert.Equal(t, 1, gaps)
}

// TestAgentStoppedWithSIGTERMIsNotActive: an agent stopped with SIGTERM
// deregisters after its drain, so `agents list` shows it deregistered at
// once, not active until the agent-lost threshold (Lite's default, 60 s,
// far longer than this test waits); a new process of the same name takes
// the name over at once, with the same id.
func TestAgentStoppedWithSIGTERMIsNotActive(t *testing.T) {
	t.Parallel()
	lite := startLite(t, liteOpts{Agents: 0})
	agent := startAgent(t, []string{lite.URL}, agentToken, "worker-1")
	id := agentID(t, agent, 30*time.Second)
	agents := func() []protocol.Agent {
		out, code := cli(t, lite, "agents", "list", "-o", "json")
		require.Equal(t, 0, code, out)
		var list protocol.AgentList // the API's shape (GET /v1/agents)
		require.NoError(t, json.Unmarshal([]byte(out), &list))
		return list.Agents
	}
	require.Len(t, agents(), 1)
	require.Equal(t, "active", agents()[0].State)
	agent.signal(syscall.SIGTERM)
	assert.Equal(t, 0, agent.waitExit(t, 30*time.Second), "a clean exit")
	list := agents()
	require.Len(t, list, 1)
	assert.Equal(t, id, list[0].ID)
	assert.Equal(t, "deregistered", list[0].State, "stopped, not active")
	assert.Regexp(t, `(?m)^\d+\s+worker-1\s+deregistered\s`, cliOK(t, lite, "agents", "list"), "the table says so too")

	again := startAgent(t, []string{lite.URL}, agentToken, "worker-1")
	assert.Equal(t, id, agentID(t, again, 30*time.Second), "a restart takes its name over at once")
	assert.Equal(t, "active", agents()[0].State)
}

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// handoffDAG's producer and consumer need different tags, so they run on
// two different agents (two `vigil agent` processes, with their own
// TMPDIR and nothing shared but the control plane); too-much writes
// 70,005 bytes of outputs.
const handoffDAG = `dag_id: handoff
tasks:
  - id: produce
    tags: [left]
    command:
      - sh
      - -c
      - |
        echo "path=/data/$VIGIL_RUN_ID.csv" >> "$VIGIL_OUTPUT"
        printf 'note<<EOF\nline one\nline two\nEOF\n' >> "$VIGIL_OUTPUT"
  - id: consume
    tags: [right]
    depends_on: [produce]
    command:
      - sh
      - -c
      - |
        echo "got path=$VIGIL_INPUT_PRODUCE_PATH"
        printf '%s\n' "$VIGIL_INPUT_PRODUCE_NOTE" | sed 's/^/note: /'
  - id: too-much
    tags: [left]
    command: [sh, -c, 'head -c 70000 /dev/zero | tr "\0" x | sed "s/^/blob=/" >> "$VIGIL_OUTPUT"']
`

// TestOutputsReachADownstreamOnAnotherAgent: real processes, a Lite
// without agents and two agents with different tags. The producer's
// outputs, a multi-line one included, reach the consumer on the other
// agent as VIGIL_INPUT_* variables; `vigil runs outputs` shows them; a
// task that writes more than 64 KiB fails output_too_large with the size
// and the limit in its message.
func TestOutputsReachADownstreamOnAnotherAgent(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "handoff", handoffDAG)
	lite := startLite(t, liteOpts{Agents: 0, DAGs: dags})
	left := startAgent(t, []string{lite.URL}, agentToken, "left-host", "--tags", "left")
	right := startAgent(t, []string{lite.URL}, agentToken, "right-host", "--tags", "right")
	leftID, rightID := agentID(t, left, 30*time.Second), agentID(t, right, 30*time.Second)

	run, _ := triggerJSON(t, lite, "handoff", false)
	d := waitRunState(t, lite, run.ID, "failed", 60*time.Second) // too-much fails it
	produce, consume, tooMuch := taskInstance(t, d, "produce"), taskInstance(t, d, "consume"), taskInstance(t, d, "too-much")
	require.Equal(t, "success", produce.State, "%+v", produce)
	require.Equal(t, "success", consume.State, "%+v", consume)
	require.NotNil(t, produce.AgentID)
	require.NotNil(t, consume.AgentID)
	assert.Equal(t, leftID, *produce.AgentID, "produce ran on the left agent")
	assert.Equal(t, rightID, *consume.AgentID, "consume ran on the right agent")

	var lines []string
	for _, l := range taskLogs(t, lite, run.ID, "consume").Lines {
		lines = append(lines, l.Line)
	}
	assert.Equal(t, []string{fmt.Sprintf("got path=/data/%d.csv", run.ID), "note: line one", "note: line two"}, lines)

	assert.Equal(t, "failed", tooMuch.State)
	assert.Equal(t, "output_too_large", tooMuch.Reason)
	assert.Contains(t, tooMuch.Message, "outputs are 70004 bytes of keys and values, over the limit of 65536 bytes per task instance")

	out := cliOK(t, lite, "runs", "outputs", fmt.Sprint(run.ID), "-o", "json")
	var list protocol.OutputList
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	require.Len(t, list.Outputs, 1, "only produce has outputs: %s", out)
	assert.Equal(t, "produce", list.Outputs[0].TaskID)
	assert.Equal(t, map[string]string{"path": fmt.Sprintf("/data/%d.csv", run.ID), "note": "line one\nline two"}, list.Outputs[0].Outputs)
	table := cliOK(t, lite, "runs", "outputs", fmt.Sprint(run.ID), "--task", "produce")
	assert.Contains(t, strings.Fields(table), `one\nline`, table)
}

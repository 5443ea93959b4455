package api_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// POST /v1/dags warns, naming the DAG, task and tags, when no live agent
// offers a task's tags, and applies the DAG all the same; once an agent
// offering them is live, the same apply warns no more. A task that needs
// two tags offered only by different agents is warned about too.
func TestApplyWarnsAboutTagsNoLiveAgentOffers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	yaml := "dag_id: train\ntasks:\n  - id: fit\n    command: [\"true\"]\n    tags: [gpu]\n  - id: plain\n    command: [\"true\"]\n"
	apply := func(yaml string) protocol.ApplyDAGResponse {
		var res protocol.ApplyDAGResponse
		code, e := h.call("POST", "/v1/dags", opToken, protocol.ApplyDAGRequest{YAML: yaml}, &res)
		require.Equal(t, 200, code, e.Message)
		return res
	}
	res := apply(yaml)
	assert.Equal(t, "created", res.Result, "a warning is not a refusal")
	require.Len(t, res.Warnings, 1, "only the task with tags")
	assert.Contains(t, res.Warnings[0], "dag train task fit: tags [gpu]: no live agent offers tags [gpu] (0 live agents)")
	assert.Contains(t, res.Warnings[0], "dispatch_lost")

	h.register("gpu-host", []string{"gpu", "linux"}, 1)
	res = apply(yaml)
	assert.Equal(t, "unchanged", res.Result)
	assert.Empty(t, res.Warnings, "an agent offering gpu is live")

	h.register("ssd-host", []string{"ssd"}, 1)
	res = apply("dag_id: both\ntasks:\n  - id: x\n    command: [\"true\"]\n    tags: [gpu, ssd]\n")
	require.Len(t, res.Warnings, 1)
	assert.Contains(t, res.Warnings[0], "dag both task x: tags [gpu ssd]: no single live agent offers all of its tags [gpu ssd] (2 live agents)")
}

package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// GET /v1/runs/{id} is bounded: a run wider than a page comes a page of
// TIs at a time in task id order, by the task id cursor, each TI with its
// place in the DAG, with the whole run's counts on every page.
func TestGetRunPagesItsTaskInstances(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	const tasks = protocol.TIsPageMax + 5
	h.applyDAG(wideDAG("wide", tasks, ""))
	runID := h.trigger("wide")
	path := fmt.Sprintf("/v1/runs/%d", runID)

	var first protocol.RunDetail
	code, e := h.call("GET", path, opToken, nil, &first)
	require.Equal(t, http.StatusOK, code, e.Message)
	require.Len(t, first.TaskInstances, protocol.TIsPageDefault)
	assert.Equal(t, tasks, first.TaskCounts["none"], "the counts are the whole run's")
	for i := 1; i < len(first.TaskInstances); i++ {
		require.Less(t, first.TaskInstances[i-1].TaskID, first.TaskInstances[i].TaskID, "task id order")
	}
	require.NotNil(t, first.NextCursor)
	assert.Equal(t, first.TaskInstances[protocol.TIsPageDefault-1].TaskID, *first.NextCursor, "the task id of the page's last TI")

	var rest protocol.RunDetail
	code, e = h.call("GET", path+"?after="+*first.NextCursor, opToken, nil, &rest)
	require.Equal(t, http.StatusOK, code, e.Message)
	require.Len(t, rest.TaskInstances, tasks-protocol.TIsPageDefault)
	assert.Nil(t, rest.NextCursor)
	ordinals := map[int]string{}
	for _, ti := range append(first.TaskInstances, rest.TaskInstances...) {
		assert.Equal(t, fmt.Sprintf("t%03d", ti.Ordinal), ti.TaskID, "the TI's place in the DAG")
		_, twice := ordinals[ti.Ordinal]
		assert.False(t, twice, "%s twice", ti.TaskID)
		ordinals[ti.Ordinal] = ti.TaskID
	}
	assert.Len(t, ordinals, tasks)

	var two protocol.RunDetail
	code, e = h.call("GET", fmt.Sprintf("%s?after=%s&limit=2", path, first.TaskInstances[10].TaskID), opToken, nil, &two)
	require.Equal(t, http.StatusOK, code, e.Message)
	assert.Equal(t, first.TaskInstances[11:13], two.TaskInstances)
	require.NotNil(t, two.NextCursor)
	assert.Equal(t, first.TaskInstances[12].TaskID, *two.NextCursor)

	for _, c := range []struct{ query, want string }{
		{"limit=0", `query parameter limit: "0" must be an integer in 1..1000`},
		{"limit=1001", `query parameter limit: "1001" must be an integer in 1..1000`},
		{"after=no%20such%20id", `query parameter after: "no such id" is not a task id (the next_cursor of the previous page)`},
	} {
		code, e := h.call("GET", path+"?"+c.query, opToken, nil, nil)
		assert.Equal(t, http.StatusBadRequest, code, c.query)
		assert.Equal(t, c.want, e.Message, c.query)
	}
	code, e = h.call("GET", "/v1/runs/987654?limit=10", opToken, nil, nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, protocol.CodeNotFound, e.Code)
}

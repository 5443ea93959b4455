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
// TIs at a time, by the ordinal cursor outputs use, with the whole run's
// counts on every page.
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
	require.NotNil(t, first.NextCursor)
	assert.Equal(t, protocol.TIsPageDefault-1, *first.NextCursor, "the ordinal of the page's last TI")

	var rest protocol.RunDetail
	code, e = h.call("GET", fmt.Sprintf("%s?after=%d", path, *first.NextCursor), opToken, nil, &rest)
	require.Equal(t, http.StatusOK, code, e.Message)
	require.Len(t, rest.TaskInstances, tasks-protocol.TIsPageDefault)
	assert.Nil(t, rest.NextCursor)
	seen := map[string]bool{}
	for _, ti := range append(first.TaskInstances, rest.TaskInstances...) {
		assert.False(t, seen[ti.TaskID], "%s twice", ti.TaskID)
		seen[ti.TaskID] = true
	}
	assert.Len(t, seen, tasks)

	var two protocol.RunDetail
	code, e = h.call("GET", fmt.Sprintf("%s?after=10&limit=2", path), opToken, nil, &two)
	require.Equal(t, http.StatusOK, code, e.Message)
	assert.Equal(t, first.TaskInstances[11:13], two.TaskInstances)
	require.NotNil(t, two.NextCursor)
	assert.Equal(t, 12, *two.NextCursor)

	for _, c := range []struct{ query, want string }{
		{"limit=0", `query parameter limit: "0" must be an integer in 1..1000`},
		{"limit=1001", `query parameter limit: "1001" must be an integer in 1..1000`},
		{"after=-1", `query parameter after: "-1" must be an integer in 0..2147483647`},
		{"after=x", `query parameter after: "x" must be an integer in 0..2147483647`},
	} {
		code, e := h.call("GET", path+"?"+c.query, opToken, nil, nil)
		assert.Equal(t, http.StatusBadRequest, code, c.query)
		assert.Equal(t, c.want, e.Message, c.query)
	}
	code, e = h.call("GET", "/v1/runs/987654?limit=10", opToken, nil, nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, protocol.CodeNotFound, e.Code)
}

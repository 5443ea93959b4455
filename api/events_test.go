package api_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// A run of a 600-task DAG cancelled before it starts has 602 events:
// run_queued, a ti_cancelled per task and run_cancelled.
func TestRunEventsPaging(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	const tasks = 600
	h.applyDAG(wideDAG("big", tasks, ""))
	runID := h.trigger("big")
	code, e := h.call("POST", fmt.Sprintf("/v1/runs/%d/cancel", runID), opToken, nil, nil)
	require.Equal(t, http.StatusOK, code, e.Message)
	const total = tasks + 2
	path := fmt.Sprintf("/v1/runs/%d/events", runID)

	// No limit: the default page, and a cursor at its last event.
	var first protocol.EventList
	code, e = h.call("GET", path, opToken, nil, &first)
	require.Equal(t, http.StatusOK, code, e.Message)
	require.Len(t, first.Events, protocol.EventsPageDefault)
	assert.Equal(t, "run_queued", first.Events[0].Kind)
	for i := 1; i < len(first.Events); i++ {
		require.Greater(t, first.Events[i].ID, first.Events[i-1].ID, "oldest first")
	}
	require.NotNil(t, first.NextCursor)
	assert.Equal(t, first.Events[len(first.Events)-1].ID, *first.NextCursor)

	// The cursor reads the rest; the last page has next_cursor null.
	var rest protocol.EventList
	code, e = h.call("GET", fmt.Sprintf("%s?after=%d", path, *first.NextCursor), opToken, nil, &rest)
	require.Equal(t, http.StatusOK, code, e.Message)
	require.Len(t, rest.Events, total-protocol.EventsPageDefault)
	assert.Greater(t, rest.Events[0].ID, *first.NextCursor)
	assert.Equal(t, "run_cancelled", rest.Events[len(rest.Events)-1].Kind)
	assert.Nil(t, rest.NextCursor)

	// The largest limit takes everything in one page.
	var all protocol.EventList
	code, e = h.call("GET", fmt.Sprintf("%s?limit=%d", path, protocol.EventsPageMax), opToken, nil, &all)
	require.Equal(t, http.StatusOK, code, e.Message)
	assert.Equal(t, append(first.Events, rest.Events...), all.Events)
	assert.Nil(t, all.NextCursor)

	// A small limit with a cursor in the middle.
	mid := all.Events[99].ID
	var small protocol.EventList
	code, e = h.call("GET", fmt.Sprintf("%s?after=%d&limit=2", path, mid), opToken, nil, &small)
	require.Equal(t, http.StatusOK, code, e.Message)
	assert.Equal(t, all.Events[100:102], small.Events)
	require.NotNil(t, small.NextCursor)
	assert.Equal(t, all.Events[101].ID, *small.NextCursor)

	// Past the end: an empty list, not null, and no cursor.
	last := all.Events[total-1].ID
	raw := h.eventsBody(fmt.Sprintf("%s?after=%d", path, last))
	assert.JSONEq(t, `{"events":[],"next_cursor":null}`, raw)
}

// eventsBody GETs path with the operator token and returns the 200 body
// as sent.
func (h *harness) eventsBody(path string) string {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.srv.URL+path, nil)
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+opToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	require.Equal(h.t, http.StatusOK, resp.StatusCode, string(b))
	return string(b)
}

func TestRunEventsBadQueryIs400(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	h.applyDAG(wideDAG("small", 1, ""))
	runID := h.trigger("small")
	path := fmt.Sprintf("/v1/runs/%d/events", runID)
	for _, c := range []struct{ query, want string }{
		{"limit=0", `query parameter limit: "0" must be an integer in 1..5000`},
		{"limit=5001", `query parameter limit: "5001" must be an integer in 1..5000`},
		{"limit=-3", `query parameter limit: "-3" must be an integer in 1..5000`},
		{"limit=ten", `query parameter limit: "ten" must be an integer in 1..5000`},
		{"after=-1", `query parameter after: "-1" must be an integer in 0..9223372036854775807`},
		{"after=x&limit=10", `query parameter after: "x" must be an integer in 0..9223372036854775807`},
		{"after=99999999999999999999", `query parameter after: "99999999999999999999" must be an integer in 0..9223372036854775807`},
	} {
		code, e := h.call("GET", path+"?"+c.query, opToken, nil, nil)
		assert.Equal(t, http.StatusBadRequest, code, c.query)
		assert.Equal(t, protocol.CodeBadRequest, e.Code, c.query)
		assert.Equal(t, c.want, e.Message, c.query)
	}

	// Limits at both ends are fine; an unknown run is a 404 whatever the page.
	for _, q := range []string{"limit=1", "limit=5000", "after=0", "after=12345&limit=7"} {
		var page protocol.EventList
		code, e := h.call("GET", path+"?"+q, opToken, nil, &page)
		assert.Equal(t, http.StatusOK, code, "%s: %s", q, e.Message)
	}
	code, e := h.call("GET", "/v1/runs/987654/events?limit=10", opToken, nil, nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, protocol.CodeNotFound, e.Code)
}

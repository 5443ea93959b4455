package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// GET /v1/runs?state= accepts exactly the run states (package state) and
// filters by them; the JSON carries states as plain strings.
func TestListRunsFiltersByRunState(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	h.applyDAG(wideDAG("filter", 2, ""))
	kept, cancelled := h.trigger("filter"), h.trigger("filter")
	code, e := h.call("POST", fmt.Sprintf("/v1/runs/%d/cancel", cancelled), opToken, nil, nil)
	require.Equal(t, http.StatusOK, code, e.Message)

	for q, want := range map[string][]int64{
		"":                 {cancelled, kept},
		"?state=queued":    {kept},
		"?state=cancelled": {cancelled},
		"?state=success":   nil,
	} {
		var list protocol.RunList
		code, e := h.call("GET", "/v1/runs"+q, opToken, nil, &list)
		require.Equal(t, http.StatusOK, code, "%s: %s", q, e.Message)
		var ids []int64
		for _, r := range list.Runs {
			ids = append(ids, r.ID)
		}
		assert.Equal(t, want, ids, q)
	}

	var run protocol.RunDetail
	code, e = h.call("GET", fmt.Sprintf("/v1/runs/%d", cancelled), opToken, nil, &run)
	require.Equal(t, http.StatusOK, code, e.Message)
	assert.Equal(t, "cancelled", run.State)
	assert.Equal(t, "cancelled", run.Reason)
	assert.Equal(t, map[string]int{"cancelled": 2}, run.TaskCounts)

	// A TI state or anything else is not a run state.
	for _, bad := range []string{"bogus", "none", "up_for_retry"} {
		code, e := h.call("GET", "/v1/runs?state="+bad, opToken, nil, nil)
		assert.Equal(t, http.StatusBadRequest, code, bad)
		assert.Equal(t, protocol.CodeBadRequest, e.Code, bad)
		assert.Equal(t, fmt.Sprintf("state: %q must be one of queued, running, success, failed, cancelled", bad), e.Message)
	}
}

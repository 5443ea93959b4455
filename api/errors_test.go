package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// A store error's message is sent once: the code carries "conflict", so
// the message does not end with it again.
func TestStoreErrorMessageSaysItOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	h.applyDAG(wideDAG("once", 1, ""))
	runID := h.trigger("once")
	path := fmt.Sprintf("/v1/runs/%d/cancel", runID)
	code, e := h.call("POST", path, opToken, nil, nil)
	require.Equal(t, http.StatusOK, code, e.Message)

	code, e = h.call("POST", path, opToken, nil, nil)
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, protocol.CodeConflict, e.Code)
	assert.Equal(t, fmt.Sprintf("cancel run %d: it is already cancelled", runID), e.Message)

	code, e = h.call("POST", "/v1/runs/999999/cancel", opToken, nil, nil)
	assert.Equal(t, http.StatusNotFound, code)
	assert.True(t, strings.HasSuffix(e.Message, " not found"), e.Message)
	assert.NotContains(t, e.Message, ": not found")
}

// A rejected threshold is named by the API's JSON field, never by a
// server flag.
func TestThresholdErrorNamesJSONField(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	code, e := h.call("PUT", "/v1/thresholds", opToken, map[string]string{"agent_lost": "500ms", "orphan": "48h"}, nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, e.Message, "agent_lost: 500ms is outside 1s..2h0m0s")
	assert.Contains(t, e.Message, "orphan: 48h0m0s is outside 1s..24h0m0s")
	assert.NotContains(t, e.Message, "threshold")
	assert.NotContains(t, e.Message, "AgentLost")
}

package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

const paramsDAG = "dag_id: export\nparams:\n  region: {type: string, default: eu}\n  limit: {type: int}\n" +
	"tasks:\n  - id: a\n    command: [\"true\"]\n"

// A trigger's conf is checked against the DAG's params: accepted values
// come back typed with defaults filled, and reach the claim as
// VIGIL_PARAM_* values; a broken rule is a 400 naming the key and the
// rule, and creates no run.
func TestTriggerConf(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(paramsDAG)

	var run protocol.Run
	code, e := h.call("POST", "/v1/dags/export/runs", opToken, protocol.TriggerRunRequest{Conf: map[string]any{"limit": "7"}}, &run)
	require.Equal(t, http.StatusCreated, code, e.Message)
	assert.Equal(t, map[string]any{"limit": float64(7), "region": "eu"}, run.Conf)
	var detail protocol.RunDetail
	code, e = h.call("GET", fmt.Sprintf("/v1/runs/%d", run.ID), opToken, nil, &detail)
	require.Equal(t, http.StatusOK, code, e.Message)
	assert.Equal(t, run.Conf, detail.Conf, "the stored conf reads back")

	agent := h.register("conf-agent", nil, 1)
	tasks := h.claim(agent, 1, 10*time.Second)
	require.Len(t, tasks, 1)
	assert.Equal(t, map[string]string{"limit": "7", "region": "eu"}, tasks[0].Params)

	var plain protocol.Run
	code, e = h.call("POST", "/v1/dags/export/runs", opToken, nil, &plain)
	require.Equal(t, http.StatusCreated, code, "no body: a run with the defaults: %s", e.Message)
	assert.Equal(t, map[string]any{"region": "eu"}, plain.Conf)

	for _, c := range []struct {
		conf map[string]any
		want string
	}{
		{map[string]any{"limt": 1}, `dag "export": conf key "limt": unknown param: the DAG declares limit, region`},
		{map[string]any{"limit": "many"}, `dag "export": conf key "limit": must be a int`},
		{map[string]any{"Limit": 1}, `dag "export": conf key "Limit": `},
		{map[string]any{"limit": map[string]any{"n": 1}}, `dag "export": conf key "limit": must be a int`},
	} {
		code, e := h.call("POST", "/v1/dags/export/runs", opToken, protocol.TriggerRunRequest{Conf: c.conf}, nil)
		assert.Equal(t, http.StatusBadRequest, code, "%v", c.conf)
		assert.Equal(t, protocol.CodeBadRequest, e.Code)
		assert.True(t, strings.HasPrefix(e.Message, c.want), "%q, want prefix %q", e.Message, c.want)
	}
	code, e = h.call("POST", "/v1/dags/export/runs", opToken, map[string]any{"params": map[string]any{}}, nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, e.Message, `unknown field "params"`)
	code, _ = h.call("POST", "/v1/dags/nope/runs", opToken, protocol.TriggerRunRequest{Conf: map[string]any{"a": 1}}, nil)
	assert.Equal(t, http.StatusNotFound, code)

	var list protocol.RunList
	code, _ = h.call("GET", "/v1/runs?dag_id=export", opToken, nil, &list)
	require.Equal(t, http.StatusOK, code)
	assert.Len(t, list.Runs, 2, "a rejected conf creates no run")
}

// Backfill over the API: counts of created and existing runs, a repeat
// creates nothing, and each bad input is a 400 naming its field.
func TestBackfillAPI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	h.applyDAG("dag_id: nightly\nschedule: \"@daily\"\nstart_date: 2025-01-01T00:00:00Z\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	h.applyDAG("dag_id: adhoc\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	body := protocol.BackfillRequest{From: "2025-01-01T00:00:00Z", To: "2025-01-03T00:00:00Z"}

	var res protocol.BackfillResponse
	code, e := h.call("POST", "/v1/dags/nightly/backfill", opToken, body, &res)
	require.Equal(t, http.StatusOK, code, e.Message)
	assert.Equal(t, 3, res.Slots)
	assert.Equal(t, 3, res.Created)
	assert.Equal(t, 0, res.Existing)
	require.Len(t, res.RunIDs, 3)
	var detail protocol.RunDetail
	code, _ = h.call("GET", fmt.Sprintf("/v1/runs/%d", res.RunIDs[0]), opToken, nil, &detail)
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "backfill", detail.RunType)
	assert.True(t, detail.LogicalDate.Equal(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)))
	assert.True(t, detail.DataIntervalEnd.Equal(time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC)))

	code, e = h.call("POST", "/v1/dags/nightly/backfill", opToken, body, &res)
	require.Equal(t, http.StatusOK, code, e.Message)
	assert.Equal(t, 0, res.Created)
	assert.Equal(t, 3, res.Existing)
	assert.Equal(t, []int64{}, res.RunIDs)

	future := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]string{"to": body.To}, "request body: from: required"},
		{protocol.BackfillRequest{From: "2025-01-01", To: body.To}, `request body: from: "2025-01-01" is not an RFC 3339 time`},
		{protocol.BackfillRequest{From: body.From, To: "tomorrow"}, `request body: to: "tomorrow" is not an RFC 3339 time`},
		{protocol.BackfillRequest{From: body.To, To: body.From}, `backfill of dag "nightly": from: 2025-01-03T00:00:00Z is after to`},
		{protocol.BackfillRequest{From: body.From, To: future}, `backfill of dag "nightly": to: ` + future + " is in the future"},
		{map[string]string{"from": body.From, "to": body.To, "until": body.To}, `unknown field "until"`},
	} {
		code, e := h.call("POST", "/v1/dags/nightly/backfill", opToken, c.body, nil)
		assert.Equal(t, http.StatusBadRequest, code, "%v", c.body)
		assert.Contains(t, e.Message, c.want)
	}
	h.applyDAG("dag_id: hourly\nschedule: \"@hourly\"\nstart_date: 2025-01-01T00:00:00Z\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	code, e = h.call("POST", "/v1/dags/hourly/backfill", opToken, protocol.BackfillRequest{From: body.From, To: "2025-03-01T00:00:00Z"}, nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, e.Message, `to: [2025-01-01T00:00:00Z, 2025-03-01T00:00:00Z] holds more than 1000 slots of schedule "@hourly": split it`)
	code, e = h.call("POST", "/v1/dags/adhoc/backfill", opToken, body, nil)
	assert.Equal(t, http.StatusConflict, code)
	assert.Contains(t, e.Message, `dag "adhoc" has no schedule`)
	code, _ = h.call("POST", "/v1/dags/nope/backfill", opToken, body, nil)
	assert.Equal(t, http.StatusNotFound, code)
}

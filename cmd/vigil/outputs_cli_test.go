package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// TestRunsOutputs: one row per output in the table, a multi-line value on
// one line; -o json the API's shape with every page read; --task asks the
// server for that task only.
func TestRunsOutputs(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	next := 0
	f.mux.HandleFunc("GET /v1/runs/12/outputs", func(w http.ResponseWriter, r *http.Request) {
		page := protocol.OutputList{RunID: 12, Outputs: []protocol.TIOutputs{
			{TIID: 5, TaskID: "extract", TryNumber: 2, Outputs: map[string]string{"rows": "12", "path": "/x.csv"}, Bytes: 16}},
			NextCursor: &next}
		if r.URL.Query().Get("after") == "0" || r.URL.Query().Get("task_id") != "" {
			page = protocol.OutputList{RunID: 12, Outputs: []protocol.TIOutputs{
				{TIID: 6, TaskID: "report", TryNumber: 1, Outputs: map[string]string{"summary": "a\nb"}, Bytes: 10}}}
		}
		fakeJSON(w, http.StatusOK, page)
	})
	r := runCLI(t, append([]string{"runs", "outputs", "12"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4, r.stdout)
	assert.Equal(t, []string{"TASK", "TRY", "KEY", "VALUE"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"extract", "2", "path", "/x.csv"}, strings.Fields(lines[1]))
	assert.Equal(t, []string{"extract", "2", "rows", "12"}, strings.Fields(lines[2]))
	assert.Equal(t, []string{"report", "1", "summary", `a\nb`}, strings.Fields(lines[3]))
	assert.Equal(t, []string{"GET /v1/runs/12/outputs", "GET /v1/runs/12/outputs?after=0"}, f.requestLog())

	r = runCLI(t, append([]string{"runs", "outputs", "12", "--task", "report", "-o", "json"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.JSONEq(t, `{"run_id": 12, "next_cursor": null, "outputs": [
		{"ti_id": 6, "task_id": "report", "try_number": 1, "outputs": {"summary": "a\nb"}, "bytes": 10}]}`, r.stdout)
	assert.Contains(t, f.requestLog(), "GET /v1/runs/12/outputs?task_id=report")
}

package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// TestCompletionFromServer: DAG ids, run ids, task
// ids and states are completed, the first three from the server.
func TestCompletionFromServer(t *testing.T) {
	clearClientEnv(t)
	f := newFakeAPI(t)
	f.reply("GET /v1/dags", http.StatusOK, protocol.DAGList{DAGs: []protocol.DAG{{DAGID: "etl", Tasks: 3}, {DAGID: "report", Tasks: 1}}})
	f.reply("GET /v1/runs", http.StatusOK, protocol.RunList{Runs: []protocol.Run{{ID: 12, DAGID: "etl", State: "running"}, {ID: 7, DAGID: "report", State: "success"}}})
	f.reply("GET /v1/runs/12", http.StatusOK, fakeRunDetail("running", fakeTI("extract", "success"), fakeTI("load", "running")))
	t.Setenv("VIGIL_SERVER", f.URL) // completion reads the environment like a command
	t.Setenv("VIGIL_TOKEN", fakeToken)

	complete := func(args ...string) []string {
		t.Helper()
		r := runCLI(t, append([]string{"__complete"}, args...)...)
		require.NoError(t, r.err, r.stderr)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.NotEmpty(t, lines)
		assert.Equal(t, ":4", lines[len(lines)-1], "no file completion")
		var values []string
		for _, l := range lines[:len(lines)-1] {
			v, _, _ := strings.Cut(l, "\t")
			values = append(values, v)
		}
		return values
	}
	assert.Equal(t, []string{"etl", "report"}, complete("runs", "trigger", ""))
	assert.Equal(t, []string{"report"}, complete("runs", "trigger", "re"))
	assert.Equal(t, []string{"12", "7"}, complete("runs", "show", ""))
	assert.Equal(t, []string{"12"}, complete("runs", "cancel", "1"))
	assert.Equal(t, []string{"12", "7"}, complete("logs", ""))
	assert.Equal(t, []string{"extract", "load"}, complete("logs", "12", ""))
	assert.Equal(t, runStateNames, complete("runs", "list", "--state", ""))
	assert.Equal(t, []string{"etl", "report"}, complete("runs", "list", "--dag", ""))

	// The scripts themselves are cobra's (vigil completion bash|zsh|fish).
	root := newRootCmd()
	for _, shell := range []string{"bash", "zsh", "fish"} {
		c, _, err := root.Find([]string{"completion", shell})
		require.NoError(t, err)
		assert.Equal(t, "vigil completion "+shell, c.CommandPath())
	}
}

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/store/storetest"
)

// readCommands are the read commands with the API reply each one shows:
// -o json and -o yaml must print that reply's shape.
func readCommands(f *fakeAPI) []struct {
	args []string
	api  any
} {
	d := fakeRunDetail("success", fakeTI("extract", "success"))
	d.StartDate = ptrTo(cliTime(1))
	runs := protocol.RunList{Runs: []protocol.Run{d.Run}}
	events := protocol.EventList{Events: []protocol.Event{{ID: 1, RunID: 12, Time: cliTime(0), Kind: "run_queued", Message: "triggered"}}}
	dags := protocol.DAGList{DAGs: []protocol.DAG{{DAGID: "pipeline", Tasks: 3, UpdatedAt: cliTime(5)}}}
	agents := protocol.AgentList{Agents: []protocol.Agent{{ID: 4, Name: "a1", Tags: []string{"gpu"}, Capacity: 2, State: "active",
		RegisteredAt: cliTime(0), LastHeartbeatAt: cliTime(1)}}}
	th := protocol.Thresholds{AgentLost: protocol.Duration(90 * time.Second), DispatchLost: protocol.Duration(3 * time.Minute), Orphan: protocol.Duration(5 * time.Minute)}
	reap := protocol.ReapReport{DryRun: true, Grace: []protocol.GraceNotice{
		{Reaper: "agent_lost", Message: "agent-lost reaper in post-leadership grace"},
		{Reaper: "dispatch_lost", Message: "dispatch-lost reaper in post-leadership grace"},
	}, Candidates: []protocol.ReapCandidate{{Reaper: "orphan", Decision: "orphan_reaped", RunID: 12, Signal: "updated_at", SignalAt: cliTime(0), Age: protocol.Duration(time.Minute)}}}
	f.reply("GET /v1/runs", http.StatusOK, runs)
	f.reply("GET /v1/runs/12", http.StatusOK, d)
	f.reply("GET /v1/runs/12/events", http.StatusOK, events)
	f.reply("GET /v1/dags", http.StatusOK, dags)
	f.reply("GET /v1/agents", http.StatusOK, agents)
	f.reply("GET /v1/thresholds", http.StatusOK, th)
	f.reply("GET /v1/reap", http.StatusOK, reap)
	return []struct {
		args []string
		api  any
	}{
		{[]string{"runs", "list"}, runs},
		{[]string{"runs", "show", "12"}, d},
		{[]string{"runs", "events", "12"}, events},
		{[]string{"dags", "list"}, dags},
		{[]string{"agents", "list"}, agents},
		{[]string{"thresholds", "get"}, th},
		{[]string{"reap", "--dry-run"}, reap},
	}
}

// TestEveryReadCommandHasEveryOutputFormat: table, json, yaml,
// wide and name on every read command; json and yaml hold the API's shape.
func TestEveryReadCommandHasEveryOutputFormat(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	for _, c := range readCommands(f) {
		run := func(format string) cliResult {
			t.Helper()
			r := runCLI(t, append(append(c.args, "-o", format), f.serverArgs()...)...)
			require.NoError(t, r.err, "%v -o %s", c.args, format)
			require.NotEmpty(t, strings.TrimSpace(r.stdout), "%v -o %s", c.args, format)
			return r
		}
		want, err := json.Marshal(c.api)
		require.NoError(t, err)
		assert.JSONEq(t, string(want), run("json").stdout, "%v -o json is the API's reply", c.args)

		var fromYAML, fromAPI any
		require.NoError(t, yaml.Unmarshal([]byte(run("yaml").stdout), &fromYAML), "%v -o yaml", c.args)
		require.NoError(t, json.Unmarshal(want, &fromAPI))
		asJSON, err := json.Marshal(fromYAML)
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(asJSON), "%v -o yaml is the API's reply", c.args)

		table, wide := run("table").stdout, run("wide").stdout
		assert.Greater(t, len(wide), len(table), "%v -o wide adds columns", c.args)
		for _, l := range strings.Split(strings.TrimSpace(run("name").stdout), "\n") {
			assert.NotContains(t, strings.TrimSpace(l), " ", "%v -o name: one identifier a line", c.args)
		}
	}
}

func TestOutputNameListsIdentifiers(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	readCommands(f)
	r := runCLI(t, append([]string{"runs", "list", "-o", "name"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "12\n", r.stdout)
	r = runCLI(t, append([]string{"dags", "list", "-o", "name"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "pipeline\n", r.stdout)
}

// TestReapGraceIsAList: grace is a list of {reaper, message}.
func TestReapGraceIsAList(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	readCommands(f)
	r := runCLI(t, append([]string{"reap", "--dry-run", "-o", "json"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	var got struct {
		Grace []map[string]string `json:"grace"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	assert.Equal(t, []map[string]string{
		{"reaper": "agent_lost", "message": "agent-lost reaper in post-leadership grace"},
		{"reaper": "dispatch_lost", "message": "dispatch-lost reaper in post-leadership grace"},
	}, got.Grace)

	r = runCLI(t, append([]string{"reap", "--dry-run"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Contains(t, r.stdout, "agent_lost: agent-lost reaper in post-leadership grace\n")
}

// TestVersionShowsClientAndServer: the server's version comes
// from GET /v1/version, which needs no token.
func TestVersionShowsClientAndServer(t *testing.T) {
	clearClientEnv(t)
	// The real /v1/version is open: a server that sees no token.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/version" || r.Header.Get("Authorization") != "" {
			fakeError(w, http.StatusNotFound, protocol.CodeNotFound, "no route")
			return
		}
		fakeJSON(w, http.StatusOK, protocol.VersionInfo{Version: "1.4.2"})
	}))
	t.Cleanup(srv.Close)
	r := runCLI(t, "version", "-o", "json", "--server", srv.URL, "--token", fakeToken)
	require.NoError(t, r.err)
	assert.JSONEq(t, `{"client": {"version": "dev"}, "server": {"version": "1.4.2"}}`, r.stdout)

	r = runCLI(t, "version", "--server", srv.URL, "--token", fakeToken)
	require.NoError(t, r.err)
	assert.Equal(t, "client: vigil dev\nserver: vigil 1.4.2 at "+srv.URL+"\n", r.stdout)

	r = runCLI(t, "version", "--client", "-o", "json")
	require.NoError(t, r.err)
	assert.JSONEq(t, `{"client": {"version": "dev"}}`, r.stdout)

	r = runCLI(t, "version", "-o", "json", "--server", "http://127.0.0.1:1")
	assert.Equal(t, exitError, r.code, "an unreachable server fails after the client's version")
	assert.Contains(t, r.stdout, `"client"`)
	assert.Contains(t, r.stdout, `"server_error": "cannot reach the Vigil server at http://127.0.0.1:1`)
}

// TestDatabaseReadCommandsHaveEveryOutputFormat: fence show and
// migrate status, which read PostgreSQL directly, take the same -o values.
func TestDatabaseReadCommandsHaveEveryOutputFormat(t *testing.T) {
	clearClientEnv(t)
	url := storetest.DB(t)
	for _, args := range [][]string{{"fence", "show"}, {"migrate", "status"}} {
		var fromJSON map[string]any
		r := runCLI(t, append(args, "--database-url", url, "-o", "json")...)
		require.NoError(t, r.err, "%v", args)
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &fromJSON))
		r = runCLI(t, append(args, "--database-url", url, "-o", "yaml")...)
		require.NoError(t, r.err, "%v", args)
		var fromYAML map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &fromYAML))
		assert.Equal(t, len(fromJSON), len(fromYAML), "%v: yaml has json's keys", args)
		for k := range fromJSON {
			assert.Contains(t, fromYAML, k, "%v", args)
		}
		for _, format := range []string{"table", "wide", "name"} {
			r = runCLI(t, append(args, "--database-url", url, "-o", format)...)
			assert.NoError(t, r.err, "%v -o %s", args, format)
		}
		r = runCLI(t, append(args, "--database-url", url, "-o", "xml")...)
		assert.Equal(t, exitUsage, r.code)
	}
}

package main

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

func fakeQueuedRun() protocol.Run {
	return protocol.Run{ID: 12, DAGID: "pipeline", State: "queued", QueuedAt: cliTime(0)}
}

func fakeRunDetail(state string, tis ...protocol.TaskInstance) protocol.RunDetail {
	d := protocol.RunDetail{Run: fakeQueuedRun(), TaskInstances: tis}
	d.State = state
	return d
}

func fakeTI(task, state string) protocol.TaskInstance {
	return protocol.TaskInstance{RunID: 12, TaskID: task, State: state, TryNumber: 1, MaxTries: 1}
}

func TestRunsTriggerWaitSuccess(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("POST /v1/dags/pipeline/runs", http.StatusCreated, fakeQueuedRun())
	f.sequence("GET /v1/runs/12",
		fakeRunDetail("queued", fakeTI("extract", "none"), fakeTI("load", "none")),
		fakeRunDetail("running", fakeTI("extract", "running"), fakeTI("load", "none")),
		fakeErr{http.StatusServiceUnavailable, protocol.CodeUnavailable, "failing over"}, // retried
		fakeRunDetail("running", fakeTI("extract", "success"), fakeTI("load", "running")),
		fakeRunDetail("success", fakeTI("extract", "success"), fakeTI("load", "success")),
	)
	r := runCLI(t, append([]string{"runs", "trigger", "pipeline", "--wait", "--poll", "1ms"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, 0, r.code)
	assert.Equal(t, strings.Join([]string{
		"run 12 of pipeline queued",
		"  extract running",
		"  extract success",
		"  load running",
		"  load success",
		"run 12 success",
		"",
	}, "\n"), r.stdout)
	assert.Contains(t, r.stderr, "retrying")
}

func TestRunsTriggerWaitFailedExits3(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("POST /v1/dags/pipeline/runs", http.StatusCreated, fakeQueuedRun())
	failed := fakeTI("extract", "failed")
	failed.Reason, failed.Message = "exit_code", "exited with status 1"
	final := fakeRunDetail("failed", failed, fakeTI("load", "upstream_failed"))
	final.Reason, final.Message = "upstream_failed", "task extract failed"
	f.sequence("GET /v1/runs/12", final)

	r := runCLI(t, append([]string{"runs", "trigger", "pipeline", "--wait", "--poll", "1ms"}, f.serverArgs()...)...)
	require.Error(t, r.err)
	assert.Equal(t, exitRunFailed, r.code)
	assert.Contains(t, r.stdout, "  extract failed: exit_code: exited with status 1\n")
	assert.Contains(t, r.stdout, "run 12 failed (upstream_failed): task extract failed\n")
}

func TestRunsTriggerWaitJSON(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("POST /v1/dags/pipeline/runs", http.StatusCreated, fakeQueuedRun())
	f.sequence("GET /v1/runs/12", fakeRunDetail("running", fakeTI("extract", "running")), fakeRunDetail("cancelled", fakeTI("extract", "cancelled")))

	r := runCLI(t, append([]string{"runs", "trigger", "pipeline", "--wait", "--poll", "1ms", "-o", "json"}, f.serverArgs()...)...)
	assert.Equal(t, exitRunFailed, r.code)
	var got protocol.RunDetail
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	assert.Equal(t, "cancelled", got.State)
	require.Len(t, got.TaskInstances, 1)
}

func TestRunsTriggerWaitTimeout(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("POST /v1/dags/pipeline/runs", http.StatusCreated, fakeQueuedRun())
	f.sequence("GET /v1/runs/12", fakeRunDetail("running", fakeTI("extract", "running")))

	r := runCLI(t, append([]string{"runs", "trigger", "pipeline", "--wait", "--poll", "5ms", "--timeout", "50ms"}, f.serverArgs()...)...)
	require.Error(t, r.err)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.err.Error(), "run 12 still running after --timeout 50ms")
}

func TestRunsTriggerNoWait(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("POST /v1/dags/{dag_id}/runs", http.StatusCreated, protocol.Run{ID: 3, DAGID: "a.b", State: "queued"})
	r := runCLI(t, append([]string{"runs", "trigger", "a.b"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "run 3 of a.b queued\n", r.stdout)
	assert.Equal(t, []string{"POST /v1/dags/a.b/runs"}, f.requestLog())
	assert.Equal(t, []string{"Bearer " + fakeToken}, f.authLog())
}

func TestRunsTriggerAPIError(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	r := runCLI(t, "runs", "trigger", "nope", "--server", f.URL, "--token", "wrong")
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.err.Error(), "invalid bearer token (HTTP 401)")
}

func TestBadRunIDIsUsage(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	for _, args := range [][]string{
		{"runs", "show", "abc"},
		{"runs", "show", "0"},
		{"runs", "events", "1.5"},
		{"runs", "cancel", "x"},
		{"logs", "abc", "extract"},
	} {
		r := runCLI(t, append(args, f.serverArgs()...)...)
		assert.Equal(t, exitUsage, r.code, "%v: %v", args, r.err)
		if assert.Error(t, r.err) {
			assert.Contains(t, r.err.Error(), "RUN_ID", args)
		}
	}
	for _, args := range [][]string{
		{"runs", "show"},
		{"runs", "show", "1", "2"},
		{"logs", "1"},
	} {
		r := runCLI(t, append(args, f.serverArgs()...)...)
		assert.Equal(t, exitUsage, r.code, "%v: %v", args, r.err)
	}
	assert.Empty(t, f.requestLog())
}

func TestBadOutputIsUsage(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	for _, args := range [][]string{
		{"runs", "list", "-o", "xml"},
		{"dags", "list", "--output", "csv"},
		{"logs", "1", "extract", "-o", "xml"},
		{"logs", "1", "extract", "-o", "yaml"},
	} {
		r := runCLI(t, append(args, f.serverArgs()...)...)
		assert.Equal(t, exitUsage, r.code, "%v: %v", args, r.err)
		if assert.Error(t, r.err) {
			assert.Contains(t, r.err.Error(), "--output")
		}
	}
	assert.Empty(t, f.requestLog())
}

func TestRunsListValidatesState(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	r := runCLI(t, append([]string{"runs", "list", "--state", "bogus"}, f.serverArgs()...)...)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.err.Error(), "--state")
	assert.Empty(t, f.requestLog())
}

func TestRunsList(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("GET /v1/runs", http.StatusOK, protocol.RunList{Runs: []protocol.Run{{
		ID: 12, DAGID: "pipeline", State: "success", QueuedAt: cliTime(0), StartDate: ptrTo(cliTime(1)), EndDate: ptrTo(cliTime(3)),
		TaskCounts: map[string]int{"running": 1, "success": 5},
	}, {
		ID: 13, DAGID: "pipeline", State: "queued", QueuedAt: cliTime(4),
	}}})
	r := runCLI(t, append([]string{"runs", "list", "--state", "success", "--dag", "pipeline", "--limit", "5"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, []string{"GET /v1/runs?dag_id=pipeline&limit=5&state=success"}, f.requestLog())
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, r.stdout)
	assert.Equal(t, []string{"RUN_ID", "DAG", "STATE", "STARTED", "DURATION", "TASKS"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"12", "pipeline", "success", fmtTime(cliTime(1)), "2m0s", "success=5", "running=1"}, strings.Fields(lines[1]))
	assert.Equal(t, []string{"13", "pipeline", "queued", "-", "-", "-"}, strings.Fields(lines[2]))

	r = runCLI(t, append([]string{"runs", "list", "-o", "json"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	var list protocol.RunList // the API's shape (GET /v1/runs)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	assert.Len(t, list.Runs, 2)
}

func TestRunsShow(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	d := fakeRunDetail("failed", protocol.TaskInstance{
		TaskID: "extract", State: "failed", TryNumber: 2, MaxTries: 3, AgentID: ptrTo(int64(4)),
		StartedAt: ptrTo(cliTime(1)), EndDate: ptrTo(cliTime(2)), Reason: "agent_lost", Message: "agent 4 silent\tfor 90s",
		LogDropped: 40,
	}, fakeTI("load", "upstream_failed"))
	d.Reason, d.Message = "upstream_failed", "task extract failed"
	d.StartDate, d.EndDate = ptrTo(cliTime(1)), ptrTo(cliTime(2))
	d.TaskCounts = map[string]int{"upstream_failed": 1, "failed": 1}
	f.reply("GET /v1/runs/12", http.StatusOK, d)

	r := runCLI(t, append([]string{"runs", "show", "12"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	assert.Equal(t, []string{
		"Run: 12",
		"DAG: pipeline",
		"State: failed",
		"Reason: upstream_failed",
		"Message: task extract failed",
		"Queued: " + fmtTime(cliTime(0)),
		"Started: " + fmtTime(cliTime(1)),
		"Ended: " + fmtTime(cliTime(2)),
		"Duration: 1m0s",
		"Tasks: failed=1 upstream_failed=1",
		"",
		"TASK STATE TRY/MAX AGENT DURATION REASON MESSAGE",
		"extract failed 2/3 4 1m0s agent_lost agent 4 silent for 90s [log incomplete: 40 lines lost]",
		"load upstream_failed 1/1 - - - -",
	}, lines)

	r = runCLI(t, append([]string{"runs", "show", "12", "-o", "json"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	var got protocol.RunDetail
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	assert.Equal(t, "agent_lost", got.TaskInstances[0].Reason)
}

func TestRunsEvents(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("GET /v1/runs/12/events", http.StatusOK, protocol.EventList{Events: []protocol.Event{
		{ID: 1, RunID: 12, Time: cliTime(0), Kind: "run_queued", Message: "triggered"},
		{ID: 2, RunID: 12, Time: cliTime(1), Kind: "ti_claimed", TaskID: "extract", TryNumber: ptrTo(1), AgentID: ptrTo(int64(4)), Message: "claimed"},
	}})
	r := runCLI(t, append([]string{"runs", "events", "12"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, []string{"TIME", "KIND", "TASK", "TRY", "AGENT", "MESSAGE"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{fmtEventTime(cliTime(0)), "run_queued", "-", "-", "-", "triggered"}, strings.Fields(lines[1]))
	assert.Equal(t, []string{fmtEventTime(cliTime(1)), "ti_claimed", "extract", "1", "4", "claimed"}, strings.Fields(lines[2]))
	assert.Equal(t, []string{"GET /v1/runs/12/events?limit=500"}, f.requestLog(), "one page of the default size")
}

// pagedEvents serves GET /v1/runs/12/events from events the way the server
// pages them: ids above ?after, at most ?limit, next_cursor while more
// remain.
func pagedEvents(t *testing.T, f *fakeAPI, events []protocol.Event) {
	f.mux.HandleFunc("GET /v1/runs/12/events", func(w http.ResponseWriter, r *http.Request) {
		after, err := strconv.ParseInt(cmp.Or(r.URL.Query().Get("after"), "0"), 10, 64)
		require.NoError(t, err)
		limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
		require.NoError(t, err)
		page := protocol.EventList{Events: []protocol.Event{}}
		for _, e := range events {
			if e.ID <= after {
				continue
			}
			if len(page.Events) == limit {
				page.NextCursor = ptrTo(page.Events[limit-1].ID)
				break
			}
			page.Events = append(page.Events, e)
		}
		fakeJSON(w, http.StatusOK, page)
	})
}

func TestRunsEventsReadsEveryPage(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	var events []protocol.Event
	for i := range 7 {
		id := int64(10 + 3*i) // ids need not be contiguous: 10, 13, ..., 28
		events = append(events, protocol.Event{ID: id, RunID: 12, Time: cliTime(i), Kind: "ti_state", Message: "event " + strconv.FormatInt(id, 10)})
	}
	pagedEvents(t, f, events)

	r := runCLI(t, append([]string{"runs", "events", "12", "--limit", "3"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 1+7)
	for i, l := range lines[1:] {
		assert.Equal(t, []string{fmtEventTime(cliTime(i)), "ti_state", "-", "-", "-", "event", strconv.Itoa(10 + 3*i)}, strings.Fields(l))
	}
	assert.Equal(t, []string{
		"GET /v1/runs/12/events?limit=3",
		"GET /v1/runs/12/events?after=16&limit=3",
		"GET /v1/runs/12/events?after=25&limit=3",
	}, f.requestLog())

	// -o json prints the events of every page as one EventList; --after starts
	// past an id; a page size that divides the rest exactly ends on an
	// empty page.
	r = runCLI(t, append([]string{"runs", "events", "12", "--after", "13", "--limit", "5", "-o", "json"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	var got protocol.EventList
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	assert.Equal(t, events[2:], got.Events)
	assert.Nil(t, got.NextCursor)
	assert.Equal(t, []string{
		"GET /v1/runs/12/events?after=13&limit=5",
	}, f.requestLog()[3:])

	r = runCLI(t, append([]string{"runs", "events", "12", "--after", "28", "-o", "json"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.JSONEq(t, `{"events": [], "next_cursor": null}`, r.stdout, "no events after the last one: an empty list")
}

func TestRunsEventsBadFlagsAreUsage(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--limit", "0"}, "--limit: 0 must be in 1..5000"},
		{[]string{"--limit", "5001"}, "--limit: 5001 must be in 1..5000"},
		{[]string{"--after", "-1"}, "--after: -1 must not be negative"},
	} {
		r := runCLI(t, append(append([]string{"runs", "events", "12"}, c.args...), f.serverArgs()...)...)
		assert.Equal(t, exitUsage, r.code, "%v: %v", c.args, r.err)
		if assert.Error(t, r.err, c.args) {
			assert.Contains(t, r.err.Error(), c.want)
		}
	}
	assert.Empty(t, f.requestLog(), "bad flags send no request")
}

func TestRunsCancel(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("POST /v1/runs/12/cancel", http.StatusOK, protocol.Run{ID: 12, DAGID: "pipeline", State: "cancelled"})
	f.reply("POST /v1/runs/13/cancel", http.StatusConflict, protocol.ErrorBody{Error: protocol.ErrorDetail{Code: "conflict", Message: "run 13 is already success"}})

	r := runCLI(t, append([]string{"runs", "cancel", "12"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "run 12 cancelled\n", r.stdout)

	r = runCLI(t, append([]string{"runs", "cancel", "13"}, f.serverArgs()...)...)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.err.Error(), "run 13 is already success")
}

func TestUnknownSubcommandIsUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"runs", "bogus"}, {"dags", "bogus"}} {
		r := runCLI(t, args...)
		assert.Equal(t, exitUsage, r.code, args)
	}
	r := runCLI(t, "runs")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "Available Commands")
}

package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// recorded is what the fake server saw of one request.
type recorded struct {
	Method, RawPath, RawQuery, Auth, ContentType, Body string
}

// fake serves reply for every request and records it.
func fake(t *testing.T, status int, reply string) (*Client, *recorded) {
	t.Helper()
	rec := &recorded{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*rec = recorded{
			Method: r.Method, RawPath: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Body: string(b),
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, reply)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL+"/", "s3cret", srv.Client())
	require.NoError(t, err)
	return c, rec
}

func TestNewValidatesServerURL(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "127.0.0.1:8080", "ftp://host", "http://", "http://h/?x=1", "://x"} {
		_, err := New(bad, "t", nil)
		require.Error(t, err, bad)
		assert.True(t, strings.HasPrefix(err.Error(), "server: "), "%q: %v", bad, err)
	}
	for _, good := range []string{"http://127.0.0.1:8080", "https://vigil.example.com/prefix/"} {
		_, err := New(good, "t", nil)
		assert.NoError(t, err, good)
	}
}

func TestAuthHeaderAndBody(t *testing.T) {
	t.Parallel()
	c, rec := fake(t, 200, `{"dag_id":"etl","result":"created"}`)
	res, err := c.ApplyDAG(context.Background(), "dag_id: etl\n")
	require.NoError(t, err)
	assert.Equal(t, protocol.ApplyDAGResponse{DAGID: "etl", Result: "created"}, res)
	assert.Equal(t, "POST", rec.Method)
	assert.Equal(t, "/v1/dags", rec.RawPath)
	assert.Equal(t, "Bearer s3cret", rec.Auth)
	assert.Equal(t, "application/json", rec.ContentType)
	var body protocol.ApplyDAGRequest
	require.NoError(t, json.Unmarshal([]byte(rec.Body), &body))
	assert.Equal(t, "dag_id: etl\n", body.YAML)
}

func TestAPIErrorFromErrorBody(t *testing.T) {
	t.Parallel()
	c, _ := fake(t, 404, `{"error":{"code":"not_found","message":"run 7: not found"}}`)
	_, err := c.GetRun(context.Background(), 7)
	var ae *APIError
	require.True(t, errors.As(err, &ae), "%T %v", err, err)
	assert.Equal(t, APIError{Status: 404, Code: "not_found", Message: "run 7: not found"}, *ae)
	assert.Equal(t, "run 7: not found (HTTP 404)", err.Error(), "the code is not repeated: the message says it")
	assert.True(t, IsStatus(err, 404))
}

func TestAPIErrorFallsBackToRawBody(t *testing.T) {
	t.Parallel()
	c, _ := fake(t, 502, "bad gateway from proxy\n")
	_, err := c.ListDAGs(context.Background())
	var ae *APIError
	require.True(t, errors.As(err, &ae))
	assert.Equal(t, APIError{Status: 502, Message: "bad gateway from proxy"}, *ae)

	c, _ = fake(t, 503, "")
	_, err = c.ListDAGs(context.Background())
	require.True(t, errors.As(err, &ae))
	assert.Equal(t, "Service Unavailable", ae.Message)
}

func TestURLEscaping(t *testing.T) {
	t.Parallel()
	c, rec := fake(t, 201, `{"id":3,"dag_id":"a/b c","state":"queued"}`)
	run, err := c.TriggerRun(context.Background(), "a/b c")
	require.NoError(t, err)
	assert.Equal(t, int64(3), run.ID)
	assert.Equal(t, "/v1/dags/a%2Fb%20c/runs", rec.RawPath)
	assert.Empty(t, rec.ContentType, "no body, no Content-Type")
	assert.Equal(t, "Bearer s3cret", rec.Auth)

	c, rec = fake(t, 200, `{"lines":[],"ti_state":"running","terminal":false}`)
	_, err = c.Logs(context.Background(), 9, "load/x?", 2, LogCursor{Try: 2, Seq: 41})
	require.NoError(t, err)
	assert.Equal(t, "/v1/runs/9/tasks/load%2Fx%3F/logs", rec.RawPath)
	assert.Equal(t, "after=41&try=2", rec.RawQuery, "the cursor's try is the filter's")

	c, rec = fake(t, 200, `{"lines":[],"ti_state":"running","terminal":false}`)
	_, err = c.Logs(context.Background(), 9, "x", 0, LogCursor{Try: 3, Seq: 7})
	require.NoError(t, err)
	assert.Equal(t, "after=7&after_try=3", rec.RawQuery, "every try: the cursor names its try")
}

func TestQueries(t *testing.T) {
	t.Parallel()
	c, rec := fake(t, 200, `{"runs":[{"id":1,"dag_id":"etl","state":"running","task_counts":{"running":1}}]}`)
	runs, err := c.ListRuns(context.Background(), "running", "etl&x", 5)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, map[string]int{"running": 1}, runs[0].TaskCounts)
	assert.Equal(t, "dag_id=etl%26x&limit=5&state=running", rec.RawQuery)

	_, err = c.ListRuns(context.Background(), "", "", 0)
	require.NoError(t, err)
	assert.Equal(t, "", rec.RawQuery)

	c, rec = fake(t, 200, `{"events":[{"id":4,"run_id":2,"time":"2026-01-02T03:04:05Z","kind":"ti_state","message":"m"}],"next_cursor":4}`)
	page, err := c.RunEventsPage(context.Background(), 2, 3, 1)
	require.NoError(t, err)
	require.Len(t, page.Events, 1)
	assert.Equal(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), page.Events[0].Time)
	require.NotNil(t, page.NextCursor)
	assert.Equal(t, int64(4), *page.NextCursor)
	assert.Equal(t, "/v1/runs/2/events", rec.RawPath)
	assert.Equal(t, "after=3&limit=1", rec.RawQuery)

	c, rec = fake(t, 200, `{"events":[],"next_cursor":null}`)
	page, err = c.RunEventsPage(context.Background(), 2, 0, 0)
	require.NoError(t, err)
	assert.Empty(t, page.Events)
	assert.Nil(t, page.NextCursor)
	assert.Equal(t, "", rec.RawQuery, "after 0 and limit 0 leave both to the server")

	c, rec = fake(t, 200, `{"id":2,"state":"cancelled"}`)
	run, err := c.CancelRun(context.Background(), 2)
	require.NoError(t, err)
	assert.Equal(t, "cancelled", run.State)
	assert.Equal(t, "POST", rec.Method)
	assert.Equal(t, "/v1/runs/2/cancel", rec.RawPath)
}

func TestDoDecodeErrorAndPrefix(t *testing.T) {
	t.Parallel()
	var gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath = r.URL.Path
		_, _ = io.WriteString(w, "not json")
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL+"/vigil/", "", nil)
	require.NoError(t, err)
	var out map[string]any
	err = c.Do(context.Background(), http.MethodGet, "/v1/dags", nil, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "GET /v1/dags: decode reply")
	assert.Equal(t, "/vigil/v1/dags", gotPath)
	// A nil out ignores the body.
	require.NoError(t, c.Do(context.Background(), http.MethodGet, "/v1/dags", nil, nil))
}

func TestTransportError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := New(url, "t", nil)
	require.NoError(t, err)
	_, err = c.ListDAGs(context.Background())
	require.Error(t, err)
	var ae *APIError
	assert.False(t, errors.As(err, &ae))
}

// RunEvents follows next_cursor from page to page until a page has none.
func TestRunEventsFollowsPages(t *testing.T) {
	t.Parallel()
	c, queries := pagedServer(t, func(after string) any {
		var page protocol.EventList
		switch after {
		case "":
			page = protocol.EventList{Events: []protocol.Event{{ID: 1}, {ID: 2}}, NextCursor: ptr(int64(2))}
		case "2":
			page = protocol.EventList{Events: []protocol.Event{{ID: 5}, {ID: 9}}, NextCursor: ptr(int64(9))}
		case "9":
			page = protocol.EventList{Events: []protocol.Event{{ID: 10}}}
		default:
			t.Errorf("unexpected after=%q", after)
		}
		return page
	})
	evs, err := c.RunEvents(context.Background(), 7, 0, 2)
	require.NoError(t, err)
	ids := make([]int64, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	assert.Equal(t, []int64{1, 2, 5, 9, 10}, ids)
	assert.Equal(t, []string{"limit=2", "after=2&limit=2", "after=9&limit=2"}, queries())
}

// pagedServer serves each GET with page(the request's after), as JSON,
// and returns a client of it and the queries it was sent, in order.
func pagedServer(t *testing.T, page func(after string) any) (*Client, func() []string) {
	t.Helper()
	var (
		mu      sync.Mutex
		queries []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page(r.URL.Query().Get("after")))
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "s3cret", srv.Client())
	require.NoError(t, err)
	return c, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(queries)
	}
}

// GetRun reads every page of the run's TIs (task id order, by the task id
// cursor) and returns them as one run in declaration order (Ordinal),
// with no cursor left.
func TestGetRunFollowsEveryPage(t *testing.T) {
	t.Parallel()
	c, queries := pagedServer(t, func(after string) any {
		page := protocol.RunDetail{Run: protocol.Run{ID: 7, DAGID: "d", TaskCounts: map[string]int{"success": 3}}}
		switch after {
		case "":
			page.TaskInstances = []protocol.TaskInstance{{TaskID: "a", Ordinal: 2}, {TaskID: "b", Ordinal: 0}}
			page.NextCursor = ptr("b")
		case "b":
			page.TaskInstances = []protocol.TaskInstance{{TaskID: "c", Ordinal: 1}}
		default:
			t.Errorf("unexpected after=%q", after)
		}
		return page
	})
	d, err := c.GetRun(context.Background(), 7)
	require.NoError(t, err)
	var ids []string
	for _, ti := range d.TaskInstances {
		ids = append(ids, ti.TaskID)
	}
	assert.Equal(t, []string{"b", "c", "a"}, ids, "declaration order")
	assert.Equal(t, "d", d.DAGID)
	assert.Nil(t, d.NextCursor)
	assert.Equal(t, []string{"limit=1000", "after=b&limit=1000"}, queries())

	c2, _ := fake(t, 200, `{"id":7,"task_instances":[{"task_id":"a"}],"next_cursor":"a"}`)
	_, err = c2.GetRun(context.Background(), 7)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "next_cursor a does not move past after=a")
}

// A next_cursor that does not move forward is an error, not an endless loop.
func TestRunEventsRejectsStuckCursor(t *testing.T) {
	t.Parallel()
	c, _ := fake(t, 200, `{"events":[{"id":3}],"next_cursor":3}`)
	evs, err := c.RunEvents(context.Background(), 7, 3, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "next_cursor 3 does not move past after=3")
	assert.Len(t, evs, 1, "the events read so far are returned with the error")
}

func ptr[T any](v T) *T { return &v }

func TestUnreachableNamesServer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close() // nothing listens there now
	c, err := New(base, "s3cret", nil)
	require.NoError(t, err)
	_, err = c.ListDAGs(context.Background())
	var ue *UnreachableError
	require.True(t, errors.As(err, &ue), "%T %v", err, err)
	assert.Equal(t, base, ue.Server)
	assert.Equal(t, "cannot reach the Vigil server at "+base+": connection refused", err.Error())
}

func TestTriggerRunConfAndBackfillBodies(t *testing.T) {
	t.Parallel()
	c, rec := fake(t, 201, `{"id":3,"dag_id":"etl","state":"queued","queued_at":"2026-01-01T00:00:00Z","conf":{"limit":7}}`)
	run, err := c.TriggerRunConf(context.Background(), "etl", map[string]any{"limit": "7"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"limit": float64(7)}, run.Conf)
	assert.Equal(t, "/v1/dags/etl/runs", rec.RawPath)
	assert.JSONEq(t, `{"conf":{"limit":"7"}}`, rec.Body)
	_, err = c.TriggerRun(context.Background(), "etl")
	require.NoError(t, err)
	assert.Empty(t, rec.Body, "no conf, no body")

	c, rec = fake(t, 200, `{"dag_id":"etl","from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z","slots":2,"created":1,"existing":1,"run_ids":[9]}`)
	from := time.Date(2026, 1, 1, 1, 0, 0, 0, time.FixedZone("CET", 3600))
	res, err := c.Backfill(context.Background(), "etl", from, from.Add(24*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, 1, res.Created)
	assert.Equal(t, 1, res.Existing)
	assert.Equal(t, []int64{9}, res.RunIDs)
	assert.Equal(t, "POST", rec.Method)
	assert.Equal(t, "/v1/dags/etl/backfill", rec.RawPath)
	assert.JSONEq(t, `{"from":"2026-01-01T01:00:00+01:00","to":"2026-01-02T01:00:00+01:00"}`, rec.Body)
}

// Package client is the Go client of Vigil's operator HTTP API (docs/design.md §9),
// used by the CLI. Every method is one request authenticated with the
// operator bearer token; the JSON shapes are those of package protocol.
//
// A reply outside 2xx is returned as an *APIError carrying the status and
// the server's error code and message; a request that got no reply is an
// *UnreachableError naming the server, wrapping the *url.Error of net/http.
package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
)

// DefaultTimeout bounds each request when New is given no *http.Client.
const DefaultTimeout = 60 * time.Second

// maxErrorBody caps how much of an error reply is read.
const maxErrorBody = 64 << 10

// Client calls the operator API of one Vigil server. It is safe for
// concurrent use.
type Client struct {
	base  string // scheme://host[/prefix], no trailing slash
	token string
	http  *http.Client
}

// New returns a client for the server at baseURL (http or https, with a
// host; a path prefix is kept). token is sent as a bearer token when not
// empty. A nil httpClient means a default client with DefaultTimeout.
// Errors name "server" and the rule broken.
func New(baseURL, token string, httpClient *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil {
		return nil, fmt.Errorf("server: %q is not a URL: %v", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("server: %q must use http or https, e.g. http://127.0.0.1:8080", baseURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("server: %q has no host, e.g. http://127.0.0.1:8080", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("server: %q must not carry a query, fragment or user info", baseURL)
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: DefaultTimeout}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	return &Client{base: u.String(), token: token, http: httpClient}, nil
}

// APIError is a reply outside 2xx. Code and Message come from the
// protocol.ErrorBody of the reply; when the body is not one, Message is
// the body text (or the status text when the body is empty).
type APIError struct {
	Status  int
	Code    string
	Message string
}

// Error is the server's message with the status, like "cancel run 1:
// it is already success (HTTP 409)". The code is left out: the message
// already says it in words (Code stays available to callers).
func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("server replied HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
}

// UnreachableError is a request that got no reply: the server could not
// be reached (connection refused, no such host, a timeout). Server is the
// base URL that was tried; Err the transport error underneath.
type UnreachableError struct {
	Server string
	Err    error
}

// Error reads like "cannot reach the Vigil server at
// http://127.0.0.1:8080: connection refused".
func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the Vigil server at %s: %s", e.Server, transportCause(e.Err))
}

// Unwrap returns the transport error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// transportCause is the innermost useful text of a transport error: the
// *url.Error's and *net.OpError's prefixes (method, URL, "dial tcp",
// addresses) are dropped, as UnreachableError names the server itself.
func transportCause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// ApplyDAG sends one DAG spec as YAML text (POST /v1/dags). The server
// validates it; an invalid spec is an *APIError with status 400.
func (c *Client) ApplyDAG(ctx context.Context, yaml string) (protocol.ApplyDAGResponse, error) {
	var out protocol.ApplyDAGResponse
	err := c.Do(ctx, http.MethodPost, "/v1/dags", protocol.ApplyDAGRequest{YAML: yaml}, &out)
	return out, err
}

// ListDAGs returns every applied DAG (GET /v1/dags).
func (c *Client) ListDAGs(ctx context.Context) ([]protocol.DAG, error) {
	var out protocol.DAGList
	err := c.Do(ctx, http.MethodGet, "/v1/dags", nil, &out)
	return out.DAGs, err
}

// TriggerRun queues a new run of dagID (POST /v1/dags/{dag_id}/runs).
func (c *Client) TriggerRun(ctx context.Context, dagID string) (protocol.Run, error) {
	return c.TriggerRunConf(ctx, dagID, nil)
}

// TriggerRunConf queues a new run of dagID with parameters conf (key ->
// string, number or bool; docs/params.md); empty conf sends no body. A
// conf the DAG's params reject is an *APIError with status 400 whose
// message names the key and the rule.
func (c *Client) TriggerRunConf(ctx context.Context, dagID string, conf map[string]any) (protocol.Run, error) {
	var out protocol.Run
	var body any
	if len(conf) > 0 {
		body = protocol.TriggerRunRequest{Conf: conf}
	}
	err := c.Do(ctx, http.MethodPost, "/v1/dags/"+url.PathEscape(dagID)+"/runs", body, &out)
	return out, err
}

// Backfill creates backfill runs of dagID for its schedule slots with a
// logical date in [from, to] (POST /v1/dags/{dag_id}/backfill; times
// sent as RFC 3339). The reply counts the runs created and those that
// already existed. A bad range is an *APIError with status 400 naming
// from or to; a DAG without a schedule one with status 409.
func (c *Client) Backfill(ctx context.Context, dagID string, from, to time.Time) (protocol.BackfillResponse, error) {
	var out protocol.BackfillResponse
	err := c.Do(ctx, http.MethodPost, "/v1/dags/"+url.PathEscape(dagID)+"/backfill",
		protocol.BackfillRequest{From: from.Format(time.RFC3339Nano), To: to.Format(time.RFC3339Nano)}, &out)
	return out, err
}

// SetPaused pauses (paused true) or unpauses a DAG (POST
// /v1/dags/{dag_id}/pause or /unpause).
func (c *Client) SetPaused(ctx context.Context, dagID string, paused bool) (protocol.PauseDAGResponse, error) {
	var out protocol.PauseDAGResponse
	verb := "/unpause"
	if paused {
		verb = "/pause"
	}
	err := c.Do(ctx, http.MethodPost, "/v1/dags/"+url.PathEscape(dagID)+verb, nil, &out)
	return out, err
}

// NextSlots returns a DAG's next count schedule slots (GET
// /v1/dags/{dag_id}/next); count ≤ 0 leaves it to the server's default.
func (c *Client) NextSlots(ctx context.Context, dagID string, count int) (protocol.NextSlots, error) {
	var out protocol.NextSlots
	path := "/v1/dags/" + url.PathEscape(dagID) + "/next"
	if count > 0 {
		path += "?count=" + strconv.Itoa(count)
	}
	err := c.Do(ctx, http.MethodGet, path, nil, &out)
	return out, err
}

// ListRuns lists runs, newest first (GET /v1/runs). Empty state or dagID
// and a limit ≤ 0 leave that filter to the server's default.
func (c *Client) ListRuns(ctx context.Context, state, dagID string, limit int) ([]protocol.Run, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	if dagID != "" {
		q.Set("dag_id", dagID)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out protocol.RunList
	err := c.Do(ctx, http.MethodGet, withQuery("/v1/runs", q), nil, &out)
	return out.Runs, err
}

// GetRun returns a run with every one of its task instances, in
// declaration order (their Ordinal), reading page after page of
// protocol.TIsPageMax (GetRunPage, task id order) until the last. The
// run's fields are the first page's; NextCursor is nil. Errors: those of
// GetRunPage, or an error naming the cursor when the server's
// next_cursor repeats the page's after.
func (c *Client) GetRun(ctx context.Context, id int64) (protocol.RunDetail, error) {
	var first protocol.RunDetail
	read := false
	tis, err := followCursor(runPath(id), "", func(next, after string) bool { return next != after },
		func(after string) ([]protocol.TaskInstance, *string, error) {
			page, err := c.GetRunPage(ctx, id, after, protocol.TIsPageMax)
			if !read {
				first, read = page, true
			}
			return page.TaskInstances, page.NextCursor, err
		})
	slices.SortFunc(tis, func(a, b protocol.TaskInstance) int { return cmp.Compare(a.Ordinal, b.Ordinal) })
	first.TaskInstances, first.NextCursor = tis, nil
	return first, err
}

// GetRunPage returns a run with one page of its task instances (GET
// /v1/runs/{id}): those whose task id sorts after after ("" reads from
// the first), in task id order. A limit ≤ 0 leaves the page size to the
// server (protocol.TIsPageDefault), and one above protocol.TIsPageMax is
// an *APIError with status 400. The page's NextCursor is the after of the
// next page, nil on the last one.
func (c *Client) GetRunPage(ctx context.Context, id int64, after string, limit int) (protocol.RunDetail, error) {
	q := pageQuery(-1, limit)
	if after != "" {
		q.Set("after", after)
	}
	var out protocol.RunDetail
	err := c.Do(ctx, http.MethodGet, withQuery(runPath(id), q), nil, &out)
	return out, err
}

// pageQuery is the after and limit of a paged read, each left out when
// negative (after) or ≤ 0 (limit), so that the server's default applies.
func pageQuery(after int64, limit int) url.Values {
	q := url.Values{}
	if after >= 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

// followCursor reads page after page from after with fetch, which
// returns a page's items and its next cursor (nil on the last page),
// and returns every item in order. A next cursor that forward says does
// not move on from the page's after is an error naming path, which would
// otherwise loop for ever; the items read so far come with any error.
func followCursor[T any, C any](path string, after C, forward func(next, after C) bool,
	fetch func(after C) ([]T, *C, error)) ([]T, error) {
	var all []T
	for {
		items, next, err := fetch(after)
		if err != nil {
			return all, err
		}
		all = append(all, items...)
		if next == nil {
			return all, nil
		}
		if !forward(*next, after) {
			return all, fmt.Errorf("GET %s: next_cursor %v does not move past after=%v", path, *next, after)
		}
		after = *next
	}
}

// increases is followCursor's forward for numeric cursors.
func increases[C int | int64](next, after C) bool { return next > after }

// RunEventsPage returns one page of the run's events (GET
// /v1/runs/{id}/events): those with an id above after, oldest first, at
// most limit of them. after 0 reads from the start; a limit ≤ 0 leaves the
// page size to the server (protocol.EventsPageDefault), and a limit above
// protocol.EventsPageMax is an *APIError with status 400. The page's
// NextCursor is the after of the next page, nil on the last one.
func (c *Client) RunEventsPage(ctx context.Context, id, after int64, limit int) (protocol.EventList, error) {
	if after == 0 {
		after = -1 // the server's default: left out of the query
	}
	var out protocol.EventList
	err := c.Do(ctx, http.MethodGet, withQuery(runPath(id)+"/events", pageQuery(after, limit)), nil, &out)
	return out, err
}

// RunEvents returns every event of the run with an id above after, oldest
// first, reading page after page of pageSize events (≤ 0: the server's
// default) by following NextCursor until the last page. Errors: those of
// RunEventsPage, or an error naming the cursor when the server replies
// with a next_cursor that does not move past the page's after (which
// would otherwise loop for ever).
func (c *Client) RunEvents(ctx context.Context, id, after int64, pageSize int) ([]protocol.Event, error) {
	return followCursor(runPath(id)+"/events", after, increases[int64], func(after int64) ([]protocol.Event, *int64, error) {
		page, err := c.RunEventsPage(ctx, id, after, pageSize)
		return page.Events, page.NextCursor, err
	})
}

// CancelRun cancels a queued or running run (POST /v1/runs/{id}/cancel)
// and returns it; an already terminal run is an *APIError with status 409.
func (c *Client) CancelRun(ctx context.Context, id int64) (protocol.Run, error) {
	var out protocol.Run
	err := c.Do(ctx, http.MethodPost, runPath(id)+"/cancel", nil, &out)
	return out, err
}

// ClearRun clears task instances of run id to run them again (POST
// /v1/runs/{id}/clear; docs/rerun.md). A queued or running task instance
// in the selection is an *APIError with status 409 naming it.
func (c *Client) ClearRun(ctx context.Context, id int64, req protocol.ClearRequest) (protocol.ClearResponse, error) {
	var out protocol.ClearResponse
	err := c.Do(ctx, http.MethodPost, runPath(id)+"/clear", req, &out)
	return out, err
}

// MarkTI sets task taskID of run id (and with req.Downstream its
// dependents) to success or failed (POST
// /v1/runs/{id}/tasks/{task_id}/mark; docs/rerun.md).
func (c *Client) MarkTI(ctx context.Context, id int64, taskID string, req protocol.MarkRequest) (protocol.MarkResponse, error) {
	var out protocol.MarkResponse
	err := c.Do(ctx, http.MethodPost, runPath(id)+"/tasks/"+url.PathEscape(taskID)+"/mark", req, &out)
	return out, err
}

// LogCursor is the position of the last log line a reader has: its
// try_number and seq (zero: before the first line).
type LogCursor struct {
	Try int
	Seq int64
}

// Logs returns a page of a task's log lines after the cursor, in
// (try_number, seq) order (GET /v1/runs/{id}/tasks/{task_id}/logs). try 0
// means every try.
func (c *Client) Logs(ctx context.Context, runID int64, taskID string, try int, after LogCursor) (protocol.LogList, error) {
	q := url.Values{}
	if try > 0 {
		q.Set("try", strconv.Itoa(try))
	}
	if after.Try > 0 && after.Try != try {
		q.Set("after_try", strconv.Itoa(after.Try))
	}
	if after.Seq > 0 {
		q.Set("after", strconv.FormatInt(after.Seq, 10))
	}
	var out protocol.LogList
	err := c.Do(ctx, http.MethodGet, withQuery(runPath(runID)+"/tasks/"+url.PathEscape(taskID)+"/logs", q), nil, &out)
	return out, err
}

// Do sends one request. path is relative to the server URL, already
// escaped, and may carry a query. A non-nil body is sent as JSON; a
// non-nil out receives the decoded 2xx reply. Errors: *APIError for a
// reply outside 2xx, the transport error otherwise, or a decoding error
// naming the request.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return err // cancelled or timed out by the caller
		}
		return &UnreachableError{Server: c.base, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode reply: %w", method, path, err)
	}
	return nil
}

// decodeError builds the *APIError of a reply outside 2xx.
func decodeError(resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &APIError{Status: resp.StatusCode}
	var eb protocol.ErrorBody
	if json.Unmarshal(raw, &eb) == nil && (eb.Error.Code != "" || eb.Error.Message != "") {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
		return e
	}
	e.Message = protocol.ExplainNonProtocolReply(resp.StatusCode, strings.TrimSpace(string(raw)))
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// IsStatus reports whether err is an *APIError with the given status.
func IsStatus(err error, status int) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == status
}

func runPath(id int64) string { return "/v1/runs/" + strconv.FormatInt(id, 10) }

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// RunOutputs returns the outputs of run id's successful task instances
// (GET /v1/runs/{id}/outputs), every page, in the DAG's task order;
// taskID, when not empty, keeps that task's only (a run without that
// task is an *APIError with status 404). Errors: those of the route, or
// an error naming the cursor when the server replies with a next_cursor
// that does not move on.
func (c *Client) RunOutputs(ctx context.Context, id int64, taskID string) ([]protocol.TIOutputs, error) {
	return followCursor(runPath(id)+"/outputs", -1, increases[int], func(after int) ([]protocol.TIOutputs, *int, error) {
		q := pageQuery(int64(after), 0)
		if taskID != "" {
			q.Set("task_id", taskID)
		}
		var page protocol.OutputList
		err := c.Do(ctx, http.MethodGet, withQuery(runPath(id)+"/outputs", q), nil, &page)
		return page.Outputs, page.NextCursor, err
	})
}

package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/scheduler"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// cookieCall sends a request with a session cookie (nil: none) and an
// optional CSRF header, and returns the status and error code.
func (h *harness) cookieCall(method, path string, cookie *http.Cookie, csrf string, body any) (int, string) {
	h.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(h.t, err)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	require.NoError(h.t, err)
	if cookie != nil {
		req.AddCookie(cookie)
	}
	if csrf != "" {
		req.Header.Set(protocol.HeaderCSRF, csrf)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	var eb protocol.ErrorBody
	_ = json.NewDecoder(resp.Body).Decode(&eb)
	return resp.StatusCode, eb.Error.Code
}

// signIn posts token to /v1/session and returns the cookie and session.
func (h *harness) signIn(token string) (*http.Cookie, protocol.Session) {
	h.t.Helper()
	b, _ := json.Marshal(protocol.SessionRequest{Token: token})
	resp, err := http.Post(h.srv.URL+"/v1/session", "application/json", bytes.NewReader(b))
	require.NoError(h.t, err)
	defer resp.Body.Close()
	require.Equal(h.t, 200, resp.StatusCode)
	var sess protocol.Session
	require.NoError(h.t, json.NewDecoder(resp.Body).Decode(&sess))
	for _, c := range resp.Cookies() {
		if c.Name == protocol.SessionCookie {
			return c, sess
		}
	}
	h.t.Fatal("sign-in set no session cookie")
	return nil, sess
}

// The viewer token reads everything and changes nothing, by bearer token
// and by console session alike: the API refuses, not only the console.
func TestViewerReadsButCannotChange(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	h.applyDAG(wideDAG("view", 1, ""))
	runID := h.trigger("view")
	for _, path := range []string{"/v1/runs", fmt.Sprintf("/v1/runs/%d", runID), fmt.Sprintf("/v1/runs/%d/events", runID),
		"/v1/dags", "/v1/dags/view", "/v1/agents", "/v1/thresholds", "/v1/reap", "/v1/at-risk", "/v1/session"} {
		code, e := h.call("GET", path, viewerToken, nil, nil)
		assert.Equal(t, 200, code, "viewer GET %s: %s", path, e.Message)
	}
	cookie, sess := h.signIn(viewerToken)
	assert.Equal(t, protocol.RoleViewer, sess.Role)
	writes := []struct {
		method, path string
		body         any
	}{
		{"POST", fmt.Sprintf("/v1/runs/%d/cancel", runID), nil},
		{"POST", "/v1/dags/view/runs", nil},
		{"POST", "/v1/dags/view/pause", nil},
		{"PUT", "/v1/thresholds", map[string]string{"orphan": "10m"}},
		{"DELETE", "/v1/thresholds", nil},
		{"POST", "/v1/reap", nil},
		{"POST", "/v1/dags", protocol.ApplyDAGRequest{YAML: wideDAG("sneaky", 1, "")}},
	}
	for _, w := range writes {
		code, e := h.call(w.method, w.path, viewerToken, w.body, nil)
		assert.Equal(t, 403, code, "viewer token %s %s", w.method, w.path)
		assert.Contains(t, e.Message, "viewer role is read-only", "%s %s", w.method, w.path)
		// With the session and its own CSRF token: still the viewer.
		code, ecode := h.cookieCall(w.method, w.path, cookie, sess.CSRFToken, w.body)
		assert.Equal(t, 403, code, "viewer session %s %s", w.method, w.path)
		assert.Equal(t, protocol.CodeForbidden, ecode)
	}
	run := h.run(runID)
	assert.Equal(t, state.RunQueued, run.State, "the run was not cancelled")
	_, _, err := h.store.GetDAG(context.Background(), "sneaky")
	assert.Error(t, err, "no DAG was applied")
	assert.Len(t, h.runsOf("view"), 1, "no run was triggered")
}

func (h *harness) runsOf(dagID string) []protocol.Run {
	h.t.Helper()
	var list protocol.RunList
	code, e := h.call("GET", "/v1/runs?dag_id="+dagID, opToken, nil, &list)
	require.Equal(h.t, 200, code, e.Message)
	return list.Runs
}

// A console session: the cookie is HttpOnly and SameSite=Strict; reads
// need only the cookie; a write needs the session's own CSRF token; a
// tampered cookie or another session's token is refused; bearer clients
// need no CSRF token.
func TestSessionCookieAndCSRF(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	h.applyDAG(wideDAG("sess", 1, ""))
	cookie, sess := h.signIn(opToken)
	assert.True(t, cookie.HttpOnly, "HttpOnly")
	assert.Equal(t, http.SameSiteStrictMode, cookie.SameSite, "SameSite=Strict")
	assert.Equal(t, "/", cookie.Path)
	assert.Equal(t, protocol.RoleAdmin, sess.Role, "the operator token is the identity operator, an admin")
	assert.Equal(t, "operator", sess.Name)
	assert.Equal(t, "session", sess.Auth)
	require.NotEmpty(t, sess.CSRFToken)
	require.NotNil(t, sess.ExpiresAt)
	assert.True(t, sess.ViewerConfigured)

	code, _ := h.cookieCall("GET", "/v1/runs", cookie, "", nil)
	assert.Equal(t, 200, code, "a read needs no CSRF token")

	runID := h.trigger("sess")
	cancel := fmt.Sprintf("/v1/runs/%d/cancel", runID)
	code, ecode := h.cookieCall("POST", cancel, cookie, "", nil)
	assert.Equal(t, 403, code, "a write by cookie without the CSRF token")
	assert.Equal(t, protocol.CodeCSRF, ecode)
	_, other := h.signIn(opToken)
	code, ecode = h.cookieCall("POST", cancel, cookie, other.CSRFToken, nil)
	assert.Equal(t, 403, code, "another session's CSRF token")
	assert.Equal(t, protocol.CodeCSRF, ecode)
	assert.Equal(t, state.RunQueued, h.run(runID).State, "nothing changed")

	tampered := *cookie
	tampered.Value = strings.Replace(cookie.Value, "v2."+b64("operator")+".", "v2."+b64("viewer")+".", 1)
	require.NotEqual(t, cookie.Value, tampered.Value)
	code, ecode = h.cookieCall("GET", "/v1/runs", &tampered, "", nil)
	assert.Equal(t, 401, code, "a cookie whose identity was changed")
	assert.Equal(t, protocol.CodeUnauthorized, ecode)

	code, _ = h.cookieCall("POST", cancel, cookie, sess.CSRFToken, nil)
	assert.Equal(t, 200, code, "a write with the session's CSRF token")
	assert.Equal(t, state.RunCancelled, h.run(runID).State)

	// Bearer clients are unaffected: no cookie, no CSRF token.
	run2 := h.trigger("sess")
	code, e := h.call("POST", fmt.Sprintf("/v1/runs/%d/cancel", run2), opToken, nil, nil)
	assert.Equal(t, 200, code, e.Message)
	// An agent's bearer token cannot sign in.
	b, _ := json.Marshal(protocol.SessionRequest{Token: agentToken})
	resp, err := http.Post(h.srv.URL+"/v1/session", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 403, resp.StatusCode)
}

// GET /v1/at-risk lists, before any reaper acts, a running TI whose
// heartbeat is overdue (with the time left before agent_lost), a queued
// TI no active agent can take (with the missing tag), and a run nearing
// its timeout; and the decision it names is the one agent-lost takes.
func TestAtRiskListsWorkBeforeItIsReaped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(wideDAG("risky", 1, ""))
	h.applyDAG("dag_id: gpu\ntimeout: 10m\ntasks:\n  - id: train\n    command: [\"true\"]\n    tags: [gpu]\n")
	agentID := h.register("host-3", nil, 1)
	runID := h.trigger("risky")
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool { tasks = h.claim(agentID, 1, time.Second); return len(tasks) == 1 }, 10*time.Second, 10*time.Millisecond)
	code, e := h.call("POST", fmt.Sprintf("/v1/agents/%d/heartbeat", agentID), agentToken,
		protocol.HeartbeatRequest{Entries: []protocol.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}}}, nil)
	require.Equal(t, 200, code, e.Message)
	gpuRun := h.trigger("gpu")
	h.waitTI(gpuRun, "train", state.TIQueued, 10*time.Second)

	var fresh protocol.AtRisk
	code, e = h.call("GET", "/v1/at-risk", viewerToken, nil, &fresh)
	require.Equal(t, 200, code, e.Message)
	assert.Empty(t, fresh.Running, "a heartbeat just now is not at risk")
	assert.Empty(t, fresh.Runs, "a 10m timeout that just started is not nearing (listed in its last quarter)")

	// Age the heartbeat by 40 s: overdue by more than one interval (the
	// scheduler's default 15 s), well within the 90 s agent-lost threshold.
	db, err := pgx.Connect(context.Background(), h.dbURL)
	require.NoError(t, err)
	defer db.Close(context.Background())
	_, err = db.Exec(context.Background(), `UPDATE task_instances SET last_heartbeat_at = now() - interval '40 seconds' WHERE run_id = $1`, runID)
	require.NoError(t, err)
	_, err = db.Exec(context.Background(), `UPDATE agents SET oldest_heartbeat_at = now() - interval '40 seconds' WHERE id = $1`, agentID)
	require.NoError(t, err)
	_, err = db.Exec(context.Background(), `UPDATE runs SET deadline_at = now() + interval '2 minutes' WHERE id = $1`, gpuRun)
	require.NoError(t, err)

	var risk protocol.AtRisk
	code, e = h.call("GET", "/v1/at-risk", viewerToken, nil, &risk)
	require.Equal(t, 200, code, e.Message)
	require.Len(t, risk.Running, 1, "%+v", risk)
	r := risk.Running[0]
	assert.Equal(t, runID, r.RunID)
	assert.Equal(t, metrics.DecisionAgentLost, r.Decision)
	assert.InDelta(t, (90*time.Second - 40*time.Second).Seconds(), r.TimeLeft.D().Seconds(), 3, "time left before agent_lost")
	assert.Contains(t, r.Outcome, "silent for 40s")
	require.Len(t, risk.Queued, 1, "%+v", risk)
	assert.Equal(t, []string{"gpu"}, risk.Queued[0].MissingTags)
	assert.Equal(t, gpuRun, risk.Queued[0].RunID)
	require.Len(t, risk.Runs, 1, "the gpu run's 10m timeout has 2m left: within its last quarter")
	assert.Equal(t, gpuRun, risk.Runs[0].RunID)
	assert.InDelta(t, (2 * time.Minute).Seconds(), risk.Runs[0].TimeLeft.D().Seconds(), 15)

	// One run's share, as the run page reads it, is the same report's.
	var one protocol.AtRisk
	code, e = h.call("GET", fmt.Sprintf("/v1/at-risk?run_id=%d", runID), viewerToken, nil, &one)
	require.Equal(t, 200, code, e.Message)
	require.Len(t, one.Running, 1)
	assert.Equal(t, r.TIID, one.Running[0].TIID)
	assert.Equal(t, r.Decision, one.Running[0].Decision)
	assert.Equal(t, r.Outcome, one.Running[0].Outcome, "the overdue heartbeat, in the same words")
	assert.Empty(t, one.Queued)
	assert.Empty(t, one.Runs)
	one = protocol.AtRisk{}
	code, e = h.call("GET", fmt.Sprintf("/v1/at-risk?run_id=%d", gpuRun), viewerToken, nil, &one)
	require.Equal(t, 200, code, e.Message)
	assert.Empty(t, one.Running)
	require.Len(t, one.Queued, 1)
	assert.Equal(t, risk.Queued[0].TIID, one.Queued[0].TIID)
	require.Len(t, one.Runs, 1)

	// The queued TI says why it waits, in GET /v1/runs/{id}.
	var detail protocol.RunDetail
	code, e = h.call("GET", fmt.Sprintf("/v1/runs/%d", gpuRun), viewerToken, nil, &detail)
	require.Equal(t, 200, code, e.Message)
	require.Len(t, detail.TaskInstances, 1)
	ti := detail.TaskInstances[0]
	assert.Equal(t, "queued", ti.State)
	assert.Equal(t, string(state.ReasonNoMatchingAgent), ti.Reason)
	assert.Contains(t, ti.Message, "no active agent offers tags [gpu]")
	assert.Contains(t, ti.Message, "dispatch_lost fails it in")
	var other protocol.RunDetail
	code, e = h.call("GET", fmt.Sprintf("/v1/runs/%d", runID), viewerToken, nil, &other)
	require.Equal(t, 200, code, e.Message)
	for _, ti := range other.TaskInstances {
		assert.Empty(t, ti.Reason, "%s: a running TI has no waiting reason", ti.TaskID)
	}

	// Nothing was reaped by looking.
	assert.Equal(t, state.TIRunning, h.ti(runID, "t000").State)
	assert.Equal(t, state.TIQueued, h.ti(gpuRun, "train").State)
}

// secondReplica serves the API from a second store on the harness's
// database: another replica, sharing nothing with the first but
// PostgreSQL.
func (h *harness) secondReplica() *httptest.Server {
	h.t.Helper()
	st, err := store.Open(context.Background(), h.dbURL)
	require.NoError(h.t, err)
	m := metrics.New()
	sched, err := scheduler.New(scheduler.Config{Store: st, Metrics: m, Logger: h.log, Interval: time.Second})
	require.NoError(h.t, err)
	srv, err := api.New(api.Config{Store: st, Metrics: m, Logger: h.log, AgentToken: agentToken, OperatorToken: opToken,
		ViewerToken: viewerToken, Control: sched})
	require.NoError(h.t, err)
	hs := httptest.NewServer(srv.Handler())
	h.t.Cleanup(func() {
		hs.Close()
		st.Close()
	})
	return hs
}

// Sign-out on one replica ends the session on every replica, at once,
// though the cookie's signature and expiry still hold.
func TestSignOutRevokesOnEveryReplica(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	other := h.secondReplica()
	cookie, _ := h.signIn(opToken)
	get := func(base string) int {
		req, err := http.NewRequest("GET", base+"/v1/session", nil)
		require.NoError(t, err)
		req.AddCookie(cookie)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get(h.srv.URL))
	require.Equal(t, http.StatusOK, get(other.URL), "the other replica accepts the session before sign-out")

	code, _ := h.cookieCall("DELETE", "/v1/session", cookie, "", nil)
	require.Equal(t, http.StatusNoContent, code)

	code, e := h.cookieCall("GET", "/v1/session", cookie, "", nil)
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Equal(t, protocol.CodeUnauthorized, e)
	assert.Equal(t, http.StatusUnauthorized, get(other.URL), "signed out on every replica")
	assert.Equal(t, 1.0, testutil.ToFloat64(h.metrics.AuthFailures.WithLabelValues("session")))

	// A new sign-in is a new session, unaffected.
	again, _ := h.signIn(opToken)
	code, _ = h.cookieCall("GET", "/v1/session", again, "", nil)
	assert.Equal(t, http.StatusOK, code)
}

// b64 is a name as a session cookie carries it.
func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

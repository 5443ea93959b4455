package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// contract sends requests to a harness and checks each request and reply
// against api/openapi.json with kin-openapi's openapi3filter.
type contract struct {
	t      *testing.T
	h      *harness
	router routers.Router
	seen   map[string]bool // "METHOD /path template" of every route exercised
	// cookie and csrf, once a walk signed in, go with every request sent
	// without a token, as the console sends them.
	cookie *http.Cookie
	csrf   string
}

func newContract(t *testing.T, h *harness) *contract {
	doc := loadSpec(t)
	doc.Servers = openapi3.Servers{{URL: h.srv.URL}}
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	return &contract{t: t, h: h, router: router, seen: map[string]bool{}}
}

// do sends one request and returns the reply's status and body after
// validating both. checkRequest false skips the request's validation, for
// requests that are wrong on purpose; the reply is always validated.
func (c *contract) do(method, path, token, cred string, body any, checkRequest bool, wantStatus int) []byte {
	c.t.Helper()
	var raw []byte
	if body != nil {
		var err error
		raw, err = json.Marshal(body)
		require.NoError(c.t, err)
	}
	req, err := http.NewRequest(method, c.h.srv.URL+path, bytes.NewReader(raw))
	require.NoError(c.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if cred != "" {
		req.Header.Set(protocol.HeaderAgentCredential, cred)
	}
	if token == "" && c.cookie != nil {
		req.AddCookie(c.cookie)
		req.Header.Set(protocol.HeaderCSRF, c.csrf)
	}
	route, params, err := c.router.FindRoute(req)
	require.NoError(c.t, err, "%s %s: no operation of the document matches", method, path)
	c.seen[method+" "+route.Path] = true
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if checkRequest {
		require.NoError(c.t, openapi3filter.ValidateRequest(context.Background(), in), "%s %s: request vs the document", method, path)
		req.Body = io.NopCloser(bytes.NewReader(raw))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	for _, ck := range resp.Cookies() {
		if ck.Name == protocol.SessionCookie && ck.Value != "" {
			c.cookie = ck
		}
	}
	require.Equal(c.t, wantStatus, resp.StatusCode, "%s %s: %s", method, path, got)
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(got)), Options: &openapi3filter.Options{IncludeResponseStatus: true},
	})
	require.NoError(c.t, err, "%s %s: reply %d vs the document: %s", method, path, resp.StatusCode, got)
	return got
}

func decodeInto[T any](t *testing.T, raw []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(raw, &v), string(raw))
	return v
}

// TestOpenAPIResponsesConform drives a real server through every route of
// the route table, with real data in PostgreSQL, and validates each
// request and reply, errors included, against the document.
func TestOpenAPIResponsesConform(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c := newContract(t, h)

	// Open endpoints.
	doc := c.do("GET", "/v1/openapi.json", "", "", nil, true, 200)
	require.Equal(t, api.OpenAPI(), doc, "the served document is the embedded one")
	c.do("GET", "/metrics", "", "", nil, true, 200)
	c.do("GET", "/healthz", "", "", nil, true, 200)
	c.do("GET", "/v1/version", "", "", nil, true, 200)
	c.do("GET", "/readyz", "", "", nil, true, 200)
	c.do("GET", "/monitor/health", "", "", nil, true, 200)

	// Operator: a DAG and a run.
	yaml := "dag_id: contract\ndescription: the OpenAPI walk\ntasks:\n  - id: hello\n    command: [\"echo\", \"hi\"]\n    retries: 1\n    retry_delay: 1s\n"
	applied := decodeInto[protocol.ApplyDAGResponse](t, c.do("POST", "/v1/dags", opToken, "", protocol.ApplyDAGRequest{YAML: yaml}, true, 200))
	require.Equal(t, "created", applied.Result)
	c.do("GET", "/v1/dags", opToken, "", nil, true, 200)
	c.do("GET", "/v1/dags/contract", opToken, "", nil, true, 200)
	paused := decodeInto[protocol.PauseDAGResponse](t, c.do("POST", "/v1/dags/contract/pause", opToken, "", nil, true, 200))
	require.Equal(t, protocol.PauseDAGResponse{DAGID: "contract", Paused: true, Changed: true}, paused)
	one := decodeInto[protocol.DAG](t, c.do("GET", "/v1/dags/contract", opToken, "", nil, true, 200))
	require.True(t, one.Paused, "GET /v1/dags/{dag_id} shows the pause")
	require.Positive(t, one.SpecBytes, "spec_bytes is the stored spec's size")
	list := decodeInto[protocol.DAGList](t, c.do("GET", "/v1/dags", opToken, "", nil, true, 200))
	require.Len(t, list.DAGs, 1)
	require.True(t, list.DAGs[0].Paused, "GET /v1/dags shows the pause")
	require.Equal(t, one.SpecBytes, list.DAGs[0].SpecBytes, "the list gives the same size as the DAG")
	unpaused := decodeInto[protocol.PauseDAGResponse](t, c.do("POST", "/v1/dags/contract/unpause", opToken, "", nil, true, 200))
	require.Equal(t, protocol.PauseDAGResponse{DAGID: "contract", Paused: false, Changed: true}, unpaused)
	c.do("POST", "/v1/dags/nope/pause", opToken, "", nil, true, 404)
	next := decodeInto[protocol.NextSlots](t, c.do("GET", "/v1/dags/contract/next?count=2", opToken, "", nil, true, 200))
	require.Empty(t, next.Slots, "no schedule, no slots")
	c.do("GET", "/v1/dags/contract/next?count=0", opToken, "", nil, false, 400)
	sched := "dag_id: contract-daily\nschedule: \"@daily\"\nstart_date: 2030-01-01T00:00:00Z\ntasks:\n  - id: a\n    command: [\"true\"]\n"
	c.do("POST", "/v1/dags", opToken, "", protocol.ApplyDAGRequest{YAML: sched}, true, 200)
	next = decodeInto[protocol.NextSlots](t, c.do("GET", "/v1/dags/contract-daily/next?count=2", opToken, "", nil, true, 200))
	day := func(d int) time.Time { return time.Date(2030, 1, d, 0, 0, 0, 0, time.UTC) }
	require.Len(t, next.Slots, 2)
	for i, want := range []protocol.ScheduleSlot{{LogicalDate: day(1), DataIntervalStart: day(1), DataIntervalEnd: day(2)},
		{LogicalDate: day(2), DataIntervalStart: day(2), DataIntervalEnd: day(3)}} {
		require.True(t, want.LogicalDate.Equal(next.Slots[i].LogicalDate) && want.DataIntervalEnd.Equal(next.Slots[i].DataIntervalEnd),
			"slot %d: %+v, want %+v", i, next.Slots[i], want)
	}
	run := decodeInto[protocol.Run](t, c.do("POST", "/v1/dags/contract/runs", opToken, "", nil, true, 201))
	c.do("GET", "/v1/runs?state=queued&dag_id=contract&limit=5", opToken, "", nil, true, 200)
	grid := decodeInto[protocol.DAGGrid](t, c.do("GET", "/v1/dags/contract/grid?limit=5", opToken, "", nil, true, 200))
	require.Equal(t, []string{"hello"}, grid.Tasks)
	require.Len(t, grid.Runs, 1)
	require.Equal(t, run.ID, grid.Runs[0].ID)
	c.do("GET", "/v1/dags/contract/grid?limit=101", opToken, "", nil, false, 400)
	c.do("GET", "/v1/dags/nope/grid", opToken, "", nil, true, 404)

	// Agent: register, claim, heartbeat, logs, complete.
	reg := decodeInto[protocol.RegisterResponse](t, c.do("POST", "/v1/agents/register", agentToken, "",
		protocol.RegisterRequest{Name: "contract-agent", Tags: []string{"linux"}, Capacity: 2}, true, 200))
	ap := fmt.Sprintf("/v1/agents/%d", reg.AgentID)
	claim := decodeInto[protocol.ClaimResponse](t, c.do("POST", ap+"/claim", agentToken, reg.Credential,
		protocol.ClaimRequest{Slots: 1, Wait: protocol.Duration(10 * time.Second)}, true, 200))
	require.Len(t, claim.Tasks, 1)
	task := claim.Tasks[0]
	c.do("POST", ap+"/heartbeat", agentToken, reg.Credential,
		protocol.HeartbeatRequest{Entries: []protocol.HeartbeatEntry{{Attempt: task.Attempt, Started: true}}}, true, 200)
	watch := decodeInto[protocol.StopWatchResponse](t, c.do("POST", ap+"/stops", agentToken, reg.Credential,
		protocol.StopWatchRequest{Wait: protocol.Duration(10 * time.Millisecond)}, true, 200))
	require.False(t, watch.Stop, "nothing was cancelled")
	c.do("POST", ap+"/stops", agentToken, reg.Credential, protocol.StopWatchRequest{Wait: protocol.Duration(time.Minute)}, false, 400)
	c.do("POST", ap+"/logs", agentToken, reg.Credential, protocol.LogsRequest{Lines: []protocol.LogLine{
		{Attempt: task.Attempt, Seq: 1, Stream: protocol.StreamStdout, Time: time.Now(), Line: "hi"},
		{Attempt: task.Attempt, Seq: 2, Stream: protocol.StreamStderr, Time: time.Now(), Line: "done"},
	}}, true, 204)
	c.do("GET", fmt.Sprintf("/v1/runs/%d", run.ID), opToken, "", nil, true, 200)
	exit := 0
	c.do("POST", ap+"/complete", agentToken, reg.Credential,
		protocol.CompleteRequest{Attempt: task.Attempt, Outcome: state.OutcomeSuccess, ExitCode: &exit,
			Outputs: map[string]string{"greeting": "hello\nworld"}}, true, 200)
	h.waitRun(run.ID, 10*time.Second)

	// Operator: read it all back.
	rp := fmt.Sprintf("/v1/runs/%d", run.ID)
	c.do("GET", "/v1/runs", opToken, "", nil, true, 200)
	c.do("GET", rp, opToken, "", nil, true, 200)
	c.do("GET", rp+"/events?after=0&limit=2", opToken, "", nil, true, 200)
	c.do("GET", rp+"/events", opToken, "", nil, true, 200)
	outs := decodeInto[protocol.OutputList](t, c.do("GET", rp+"/outputs", viewerToken, "", nil, true, 200))
	require.Len(t, outs.Outputs, 1)
	require.Equal(t, map[string]string{"greeting": "hello\nworld"}, outs.Outputs[0].Outputs)
	c.do("GET", rp+"/outputs?task_id=hello&after=0", opToken, "", nil, true, 200)
	c.do("GET", rp+"/outputs?task_id=nope", opToken, "", nil, true, 404)
	c.do("GET", rp+"/outputs?after=x", opToken, "", nil, false, 400)
	logs := decodeInto[protocol.LogList](t, c.do("GET", rp+"/tasks/hello/logs?try=1", opToken, "", nil, true, 200))
	require.Len(t, logs.Lines, 2)
	c.do("GET", "/v1/agents", opToken, "", nil, true, 200)
	c.do("GET", "/v1/thresholds", opToken, "", nil, true, 200)
	c.do("PUT", "/v1/thresholds", opToken, "", map[string]string{"orphan": "10m"}, true, 200)
	c.do("DELETE", "/v1/thresholds", opToken, "", nil, true, 200)
	c.do("GET", "/v1/reap", opToken, "", nil, true, 200)
	c.do("GET", "/v1/at-risk", viewerToken, "", nil, true, 200)
	c.do("GET", fmt.Sprintf("/v1/at-risk?run_id=%d", run.ID), viewerToken, "", nil, true, 200)
	c.do("GET", "/v1/at-risk?run_id=x", viewerToken, "", nil, false, 400)
	c.do("GET", "/v1/cluster", viewerToken, "", nil, true, 200)
	c.do("PUT", "/v1/thresholds", viewerToken, "", map[string]string{"orphan": "10m"}, true, 403)
	// Secrets: set, list, a DAG naming one, delete; errors.
	setSec := decodeInto[protocol.SetSecretResponse](t, c.do("PUT", "/v1/secrets/contract_pw", opToken, "",
		protocol.SetSecretRequest{Value: "contract-value"}, true, 200))
	require.Equal(t, protocol.SetSecretResponse{Secret: protocol.Secret{Name: "contract_pw", Version: 1,
		CreatedAt: setSec.CreatedAt, UpdatedAt: setSec.UpdatedAt}, Created: true}, setSec)
	c.do("GET", "/v1/secrets", opToken, "", nil, true, 200)
	c.do("GET", "/v1/secrets", viewerToken, "", nil, true, 403)
	c.do("PUT", "/v1/secrets/contract_pw", opToken, "", protocol.SetSecretRequest{Value: "abc"}, false, 400)
	c.do("PUT", "/v1/secrets/contract-pw", opToken, "", protocol.SetSecretRequest{Value: "abcd"}, false, 400)
	withSecret := "dag_id: contract-secret\ntasks:\n  - id: a\n    command: [\"true\"]\n    env: {PW: {secret: contract_pw}}\n"
	c.do("POST", "/v1/dags", opToken, "", protocol.ApplyDAGRequest{YAML: withSecret}, true, 200)
	c.do("GET", "/v1/dags/contract-secret", opToken, "", nil, true, 200)
	c.do("DELETE", "/v1/secrets/contract_pw", opToken, "", nil, true, 204)
	c.do("DELETE", "/v1/secrets/contract_pw", opToken, "", nil, true, 404)
	c.do("POST", "/v1/dags", opToken, "", protocol.ApplyDAGRequest{YAML: withSecret}, true, 400)

	// Webhooks: set one with a secret, test it against a receiver, a DAG
	// naming it and one naming none that exists, the deliveries; errors.
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(receiver.Close)
	hook := protocol.SetWebhookRequest{URL: receiver.URL + "/hook", Secret: "hook-secret"}
	setHook := decodeInto[protocol.SetWebhookResponse](t, c.do("PUT", "/v1/webhooks/contract", opToken, "", hook, true, 200))
	require.True(t, setHook.Created && setHook.HasSecret && setHook.Format == state.WebhookJSON, "%+v", setHook)
	c.do("GET", "/v1/webhooks", opToken, "", nil, true, 200)
	c.do("PUT", "/v1/webhooks/contract", viewerToken, "", hook, true, 403)
	c.do("PUT", "/v1/webhooks/contract", opToken, "", protocol.SetWebhookRequest{URL: "ftp://x"}, false, 400)
	tested := decodeInto[protocol.WebhookTestResult](t, c.do("POST", "/v1/webhooks/contract/test", opToken, "", nil, true, 200))
	require.True(t, tested.Delivered, "%+v", tested)
	c.do("POST", "/v1/webhooks/nope/test", opToken, "", nil, true, 404)
	withHook := "dag_id: contract-hook\nnotify:\n  - on: [run_failed]\n    webhook: contract\ntasks:\n  - id: a\n    command: [\"true\"]\n"
	c.do("POST", "/v1/dags", opToken, "", protocol.ApplyDAGRequest{YAML: withHook}, true, 200)
	c.do("POST", "/v1/dags", opToken, "", protocol.ApplyDAGRequest{YAML: strings.Replace(withHook, "webhook: contract", "webhook: nope", 1)}, true, 400)
	c.do("DELETE", "/v1/webhooks/contract", opToken, "", nil, true, 409)
	c.do("GET", "/v1/notifications?state=pending&limit=5", viewerToken, "", nil, true, 200)
	c.do("GET", "/v1/notifications?state=lost", viewerToken, "", nil, false, 400)
	c.do("POST", "/v1/dags", opToken, "", protocol.ApplyDAGRequest{YAML: "dag_id: contract-hook\ntasks:\n  - id: a\n    command: [\"true\"]\n"}, true, 200)
	c.do("DELETE", "/v1/webhooks/contract", opToken, "", nil, true, 204)
	c.do("DELETE", "/v1/webhooks/contract", opToken, "", nil, true, 404)
	// Task pools and DAG deletion: set, list, a DAG naming one, the
	// refusals while in use, deletes; errors.
	withPool := "dag_id: contract-pool\ntasks:\n  - id: a\n    command: [\"true\"]\n    pool: contract\n    priority_weight: 5\n"
	c.do("POST", "/v1/dags", opToken, "", protocol.ApplyDAGRequest{YAML: withPool}, true, 400)
	setPool := decodeInto[protocol.SetPoolResponse](t, c.do("PUT", "/v1/pools/contract", opToken, "",
		protocol.SetPoolRequest{Slots: ptrTo(2)}, true, 200))
	require.True(t, setPool.Created)
	require.Equal(t, 2, setPool.Slots)
	c.do("PUT", "/v1/pools/contract", opToken, "", protocol.SetPoolRequest{Slots: ptrTo(-1)}, false, 400)
	c.do("PUT", "/v1/pools/contract", opToken, "", protocol.SetPoolRequest{}, false, 400)
	c.do("PUT", "/v1/pools/contract", viewerToken, "", protocol.SetPoolRequest{Slots: ptrTo(1)}, true, 403)
	c.do("GET", "/v1/pools", viewerToken, "", nil, true, 200)
	c.do("POST", "/v1/dags", opToken, "", protocol.ApplyDAGRequest{YAML: withPool}, true, 200)
	c.do("DELETE", "/v1/pools/contract", opToken, "", nil, true, 409)
	c.do("POST", "/v1/dags/contract-pool/runs", opToken, "", nil, true, 201)
	c.do("DELETE", "/v1/dags/contract-pool", opToken, "", nil, true, 409)
	c.do("DELETE", "/v1/dags/contract-secret", opToken, "", nil, true, 200)
	c.do("DELETE", "/v1/dags/contract-secret", opToken, "", nil, true, 404)
	c.do("DELETE", "/v1/pools/contract-none", opToken, "", nil, true, 404)
	c.do("PUT", "/v1/pools/contract-gone", opToken, "", protocol.SetPoolRequest{Slots: ptrTo(0)}, true, 200)
	c.do("DELETE", "/v1/pools/contract-gone", opToken, "", nil, true, 204)

	// Console session: sign in, read and write by cookie, sign out.
	c.do("POST", "/v1/session", "", "", protocol.SessionRequest{Token: "wrong"}, true, 401)
	c.do("POST", "/v1/session", "", "", protocol.SessionRequest{Token: agentToken}, true, 403)
	sess := decodeInto[protocol.Session](t, c.do("POST", "/v1/session", "", "", protocol.SessionRequest{Token: opToken}, true, 200))
	c.csrf = sess.CSRFToken
	c.do("GET", "/v1/session", "", "", nil, true, 200)
	c.do("GET", "/v1/at-risk", "", "", nil, true, 200)
	c.do("DELETE", "/v1/thresholds", "", "", nil, true, 200)
	c.csrf = "forged"
	c.do("DELETE", "/v1/thresholds", "", "", nil, true, 403)
	c.do("DELETE", "/v1/session", "", "", nil, true, 204)
	c.cookie = nil
	c.do("POST", "/v1/reap", opToken, "", nil, true, 200)

	// Schedules: a backfill and a trigger with conf (after the claim
	// above, so that it took the contract run's task).
	past := "dag_id: contract-past\nschedule: \"@daily\"\nstart_date: 2025-01-01T00:00:00Z\nparams:\n  limit: {type: int, default: 5}\n" +
		"tasks:\n  - id: a\n    command: [\"true\"]\n"
	c.do("POST", "/v1/dags", opToken, "", protocol.ApplyDAGRequest{YAML: past}, true, 200)
	span := protocol.BackfillRequest{From: "2025-01-01T00:00:00Z", To: "2025-01-02T00:00:00Z"}
	bf := decodeInto[protocol.BackfillResponse](t, c.do("POST", "/v1/dags/contract-past/backfill", opToken, "", span, true, 200))
	require.Equal(t, 2, bf.Created)
	bf = decodeInto[protocol.BackfillResponse](t, c.do("POST", "/v1/dags/contract-past/backfill", opToken, "", span, true, 200))
	require.Equal(t, 2, bf.Existing)
	c.do("POST", "/v1/dags/contract-past/backfill", opToken, "", protocol.BackfillRequest{From: span.To, To: span.From}, true, 400)
	c.do("POST", "/v1/dags/contract/backfill", opToken, "", span, true, 409)
	withConf := decodeInto[protocol.Run](t, c.do("POST", "/v1/dags/contract-past/runs", opToken, "",
		protocol.TriggerRunRequest{Conf: map[string]any{"limit": 9}}, true, 201))
	require.Equal(t, map[string]any{"limit": float64(9)}, withConf.Conf)
	c.do("POST", "/v1/dags/contract-past/runs", opToken, "", protocol.TriggerRunRequest{Conf: map[string]any{"lim": 9}}, true, 400)

	// Errors: each is an ErrorBody under a status the operation declares.
	c.do("POST", rp+"/cancel", opToken, "", nil, true, 409)
	c.do("GET", "/v1/runs/999999", opToken, "", nil, true, 404)
	c.do("GET", "/v1/dags/nope", opToken, "", nil, true, 404)
	c.do("GET", "/v1/runs", "", "", nil, false, 401)
	c.do("GET", "/v1/runs", agentToken, "", nil, false, 403)
	c.do("GET", "/v1/runs?limit=0", opToken, "", nil, false, 400)
	c.do("PUT", "/v1/thresholds", opToken, "", map[string]string{"orphan": "-1s"}, false, 400)
	c.do("POST", "/v1/dags", opToken, "", map[string]string{"yaml": "dag_id: bad\ntasks: []\n"}, true, 400)
	c.do("POST", ap+"/claim", agentToken, "", protocol.ClaimRequest{}, false, 403)
	c.do("POST", ap+"/complete", agentToken, reg.Credential,
		protocol.CompleteRequest{Attempt: task.Attempt, Outcome: state.OutcomeFailed, ExitCode: &exit}, true, 409)
	// A batch answers 200 with a stale_attempt result for the same item,
	// and 400 for a malformed one.
	c.do("POST", ap+"/completions", agentToken, reg.Credential, protocol.CompleteBatchRequest{
		Completions: []protocol.CompleteRequest{{Attempt: task.Attempt, Outcome: state.OutcomeSuccess, ExitCode: &exit}}}, true, 200)
	c.do("POST", ap+"/completions", agentToken, reg.Credential, protocol.CompleteBatchRequest{}, false, 400)
	c.do("POST", "/v1/agents/register", agentToken, "", protocol.RegisterRequest{Name: "contract-agent", Capacity: 1}, true, 409)

	// Mark and clear (docs/rerun.md): the ended run is marked failed, a
	// dry run lists the clear, the clear runs it again.
	marked := decodeInto[protocol.MarkResponse](t, c.do("POST", rp+"/tasks/hello/mark", opToken, "",
		protocol.MarkRequest{State: "failed", Reason: "contract"}, true, 200))
	require.Equal(t, []protocol.MarkedTI{{TaskID: "hello", State: "success"}}, marked.Marked)
	c.do("POST", rp+"/tasks/hello/mark", opToken, "", protocol.MarkRequest{State: "queued"}, false, 400)
	c.do("POST", rp+"/tasks/nope/mark", opToken, "", protocol.MarkRequest{State: "success"}, true, 404)
	c.do("POST", rp+"/tasks/hello/mark", viewerToken, "", protocol.MarkRequest{State: "success"}, true, 403)
	h.waitRun(run.ID, 10*time.Second)
	dry := decodeInto[protocol.ClearResponse](t, c.do("POST", rp+"/clear", opToken, "", protocol.ClearRequest{DryRun: true}, true, 200))
	require.Equal(t, []protocol.ClearedTI{{TaskID: "hello", State: "failed", TryNumber: 1}}, dry.Cleared)
	c.do("POST", rp+"/clear", opToken, "", protocol.ClearRequest{TaskIDs: []string{"nope"}}, true, 404)
	c.do("POST", rp+"/clear", opToken, "", protocol.ClearRequest{Reason: strings.Repeat("x", protocol.MaxReasonLen+1)}, false, 400)
	cleared := decodeInto[protocol.ClearResponse](t, c.do("POST", rp+"/clear", opToken, "", nil, true, 200))
	require.Equal(t, dry.Cleared, cleared.Cleared)
	require.Equal(t, "running", cleared.Run.State)

	// A run to cancel, then the operator deregisters the agent.
	run2 := decodeInto[protocol.Run](t, c.do("POST", "/v1/dags/contract/runs", opToken, "", nil, true, 201))
	c.do("POST", fmt.Sprintf("/v1/runs/%d/cancel", run2.ID), opToken, "", nil, true, 200)
	c.do("POST", fmt.Sprintf("/v1/runs/%d/clear", run2.ID), opToken, "", nil, true, 409)
	c.do("POST", ap+"/deregister", opToken, "", nil, true, 204)

	// Admin: the audit log of the walk so far, then, last since it fences
	// the harness's leader out, a fence reset.
	audit := decodeInto[protocol.AuditList](t, c.do("GET", "/v1/audit?limit=5", opToken, "", nil, true, 200))
	require.Len(t, audit.Records, 5)
	require.NotNil(t, audit.NextCursor)
	c.do("GET", "/v1/audit?since=yesterday", opToken, "", nil, false, 400)
	c.do("GET", "/v1/audit", aliceToken, "", nil, false, 403)
	c.do("POST", "/v1/fence/reset", opToken, "", protocol.FenceResetRequest{}, false, 400)
	reset := decodeInto[protocol.FenceResetResponse](t, c.do("POST", "/v1/fence/reset", opToken, "", protocol.FenceResetRequest{Reason: "the OpenAPI walk"}, true, 200))
	require.Equal(t, reset.Before.Generation+1, reset.After.Generation)

	var missed []string
	for _, rt := range api.Routes() {
		if !c.seen[rt.Method+" "+rt.Path] {
			missed = append(missed, rt.Method+" "+rt.Path)
		}
	}
	require.Empty(t, missed, "routes the walk never exercised: %s", strings.Join(missed, ", "))
}

// ptrTo returns a pointer to v, for optional request fields.
func ptrTo[T any](v T) *T { return &v }

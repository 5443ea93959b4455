package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/notify"
	"github.com/vigil-sched/vigil/secrets"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// TestSignAndVerify: the signature is GitHub's sha256=HMAC, hex.
func TestSignAndVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"event":"run_failed"}`)
	// echo -n '{"event":"run_failed"}' | openssl dgst -sha256 -hmac s3cret
	want := "sha256=df09fa50800f446f1b947cd574fdc6f3c9a10b9ef530786e27546953ebaad94c"
	got := notify.Sign([]byte("s3cret"), body)
	assert.Equal(t, want, got)
	assert.True(t, notify.Verify([]byte("s3cret"), body, got))
	assert.False(t, notify.Verify([]byte("other"), body, got))
	assert.False(t, notify.Verify([]byte("s3cret"), append(body, ' '), got))
}

// TestBodyFormats: json is the payload; slack one line of text.
func TestBodyFormats(t *testing.T) {
	t.Parallel()
	n := store.Notification{DeliveryID: "d-1", Event: state.NotifyTaskFailed, DAGID: "etl", RunID: 7, TaskID: "load",
		TryNumber: 2, SubjectState: "failed", Reason: "agent_lost", Message: "try 2: agent gone", CreatedAt: time.Unix(100, 0)}
	p := notify.Payload(n, "https://vigil.example.com/")
	assert.Equal(t, "https://vigil.example.com/#/runs/7", p.URL)
	body, err := notify.Body(p, state.WebhookJSON)
	require.NoError(t, err)
	var back protocol.WebhookPayload
	require.NoError(t, json.Unmarshal(body, &back))
	assert.Equal(t, p, back)
	again, err := notify.Body(notify.Payload(n, "https://vigil.example.com/"), state.WebhookJSON)
	require.NoError(t, err)
	assert.Equal(t, body, again, "every attempt posts the same bytes")
	slack, err := notify.Body(p, state.WebhookSlack)
	require.NoError(t, err)
	assert.JSONEq(t, `{"text":"Vigil task_failed: DAG etl run 7 task load try 2 is failed (agent_lost): try 2: agent gone <https://vigil.example.com/#/runs/7|open run>"}`, string(slack))
	assert.Empty(t, notify.Payload(n, "").URL, "no link without --external-url")
}

// env is a store with one DAG notifying webhook "hook", and a delivery
// service posting to a receiver the test scripts.
type env struct {
	t       *testing.T
	ctx     context.Context
	st      *store.Store
	m       *metrics.Metrics
	d       *notify.Deliverer
	box     *secrets.Box
	mu      sync.Mutex
	answers []int // statuses to answer, in order; then 204
	got     []*http.Request
	bodies  [][]byte
	url     string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, ctx: context.Background(), m: metrics.New()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.got, e.bodies = append(e.got, r), append(e.bodies, b)
		status := http.StatusNoContent
		if len(e.answers) > 0 {
			status, e.answers = e.answers[0], e.answers[1:]
		}
		e.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte(strings.Repeat("x", 500) + "\x00secret-looking reply"))
	}))
	t.Cleanup(srv.Close)
	e.url = srv.URL + "/hook/T000/B000/XXXXtoken"
	st, err := store.Open(e.ctx, storetest.DB(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	e.st = st
	require.NoError(t, st.AcquireFence(e.ctx, 1, "test"))
	e.box, err = secrets.NewBox([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	_, _, err = st.SetWebhook(e.ctx, "hook", e.url, state.WebhookJSON, func(v int64) ([]byte, error) {
		return e.box.Seal(store.WebhookSecretName("hook"), v, []byte("hook-secret"))
	})
	require.NoError(t, err)
	spec, err := dag.Parse([]byte("dag_id: d\nnotify:\n  - on: [run_failed]\n    webhook: hook\ntasks:\n  - id: t\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(e.ctx, spec)
	require.NoError(t, err)
	cfg := notify.Config{Store: st, Metrics: e.m, Secrets: e.box, RetryDelay: time.Hour, ExternalURL: "http://console"}
	require.NoError(t, cfg.Validate())
	e.d = notify.NewDeliverer(cfg)
	return e
}

// raise cancels a new run of d: one run_failed row.
func (e *env) raise() int64 {
	e.t.Helper()
	r, err := e.st.TriggerRun(e.ctx, "d")
	require.NoError(e.t, err)
	_, err = e.st.CancelRun(e.ctx, r.ID, state.ReasonCancelled, "cancelled by test")
	require.NoError(e.t, err)
	return r.ID
}

func (e *env) list() []store.Notification {
	e.t.Helper()
	ns, err := e.st.ListNotifications(e.ctx, store.NotificationFilter{Limit: 100})
	require.NoError(e.t, err)
	return ns
}

// TestDeliverSignsAndRecords: a delivered row is posted once, signed,
// with its delivery id, and recorded delivered; the metrics count it.
func TestDeliverSignsAndRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	run := e.raise()
	rep, err := e.d.RunOnce(e.ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, notify.Report{Delivered: 1}, rep)
	require.Len(t, e.got, 1)
	ns := e.list()
	require.Len(t, ns, 1)
	req, body := e.got[0], e.bodies[0]
	assert.Equal(t, ns[0].DeliveryID, req.Header.Get(protocol.HeaderDeliveryID))
	assert.Equal(t, "run_failed", req.Header.Get(protocol.HeaderEvent))
	assert.True(t, notify.Verify([]byte("hook-secret"), body, req.Header.Get(protocol.HeaderSignature)))
	var p protocol.WebhookPayload
	require.NoError(t, json.Unmarshal(body, &p))
	assert.Equal(t, run, p.RunID)
	assert.Equal(t, "cancelled", p.State)
	assert.Equal(t, state.DeliveryDelivered, ns[0].State)
	assert.Equal(t, 1.0, testutil.ToFloat64(e.m.Notify.Deliveries.WithLabelValues(metrics.DeliveryDelivered)))
	rep, err = e.d.RunOnce(e.ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, notify.Report{}, rep, "nothing left to post")
}

// TestDeliverFailureBacksOffAndKeepsOrder: a refused post is recorded
// with a bounded error that quotes neither the URL nor a long reply, the
// webhook's later rows wait for the next pass, and the failed one waits
// its back-off.
func TestDeliverFailureBacksOffAndKeepsOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.raise()
	e.raise()
	e.answers = []int{http.StatusServiceUnavailable}
	rep, err := e.d.RunOnce(e.ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, notify.Report{Failed: 1}, rep, "the second row waits behind the failed first")
	require.Len(t, e.got, 1)
	ns := e.list()
	require.Len(t, ns, 2)
	first, second := ns[1], ns[0]
	assert.Equal(t, 1, first.Attempts)
	assert.Equal(t, 503, first.LastStatus)
	assert.True(t, strings.HasPrefix(first.LastError, "HTTP 503: xxx"), first.LastError)
	assert.LessOrEqual(t, len(first.LastError), 310, "bounded")
	assert.NotContains(t, first.LastError, "\x00")
	assert.NotContains(t, first.LastError, "token")
	assert.True(t, first.NextAttemptAt.After(first.CreatedAt.Add(20*time.Minute)), "waits half to all of an hour's back-off")
	assert.Zero(t, second.Attempts, "not tried behind a failure")

	rep, err = e.d.RunOnce(e.ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, notify.Report{Delivered: 1}, rep, "the second goes next; the first waits its back-off")
}

// TestDeliverErrorHidesURL: a transport error names the failure, never
// the URL (which may carry a token).
func TestDeliverErrorHidesURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, _, err := e.st.SetWebhook(e.ctx, "hook", "http://127.0.0.1:1/services/XXXXtoken", state.WebhookJSON, nil)
	require.NoError(t, err)
	e.raise()
	rep, err := e.d.RunOnce(e.ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, notify.Report{Failed: 1}, rep)
	ns := e.list()
	assert.Contains(t, ns[0].LastError, "connection refused")
	assert.NotContains(t, ns[0].LastError, "XXXXtoken")
	res := e.d.Test(e.ctx, store.Webhook{WebhookInfo: store.WebhookInfo{Name: "hook", URL: "http://127.0.0.1:1/services/XXXXtoken"}}, "t-1")
	assert.False(t, res.Delivered)
	assert.NotContains(t, res.Error, "XXXXtoken")
}

// TestSLAServiceCounts: the sla service raises a due miss once and counts it.
func TestSLAServiceCounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec, err := dag.Parse([]byte("dag_id: s\nsla: 1h\ntasks:\n  - id: t\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = e.st.ApplyDAG(e.ctx, spec)
	require.NoError(t, err)
	_, err = e.st.TriggerRun(e.ctx, "s")
	require.NoError(t, err)
	cfg := notify.Config{Store: e.st, Metrics: e.m}
	require.NoError(t, cfg.Validate())
	sla := notify.NewSLA(cfg)
	n, err := sla.RunOnce(e.ctx, 1)
	require.NoError(t, err)
	assert.Zero(t, n, "not due for an hour")
	assert.Zero(t, testutil.ToFloat64(e.m.Notify.SLAMisses))
}

// TestConfigValidate names the flag of a bad value.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	st := &store.Store{}
	for _, tc := range []struct {
		cfg  notify.Config
		want string
	}{
		{notify.Config{MaxAge: time.Second}, "notify-max-age: 1s must be between 1m and 720h"},
		{notify.Config{RetryDelay: time.Millisecond}, "notify-retry-delay: 1ms must be between 10ms and 1h"},
		{notify.Config{ExternalURL: "ftp://x"}, "external-url: must be an http:// or https:// URL"},
	} {
		tc.cfg.Store, tc.cfg.Metrics = st, metrics.New()
		assert.EqualError(t, tc.cfg.Validate(), tc.want)
	}
}

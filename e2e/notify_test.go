package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/internal/testhook"
	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/store/storetest"
)

// The e2e tests of docs/notifications.md: a real HTTP receiver on
// loopback (an httptest server in this process) and real vigil
// processes.

// delivery is one POST the receiver got.
type delivery struct {
	ID        string // Vigil-Delivery-Id
	Signature string // Vigil-Signature
	Body      []byte
	Payload   protocol.WebhookPayload
}

// receiver is a webhook endpoint that records every POST and answers 204,
// or 503 while down.
type receiver struct {
	t    *testing.T
	srv  *httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	got  []delivery // answered 204, in arrival order
	// refused counts the POSTs answered 503.
	refused atomic.Int64
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		if err != nil || req.Method != http.MethodPost {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if r.down.Load() {
			r.refused.Add(1)
			http.Error(w, "receiver down for the test", http.StatusServiceUnavailable)
			return
		}
		d := delivery{ID: req.Header.Get(protocol.HeaderDeliveryID), Signature: req.Header.Get(protocol.HeaderSignature), Body: body}
		if err := json.Unmarshal(body, &d.Payload); err != nil {
			t.Errorf("receiver: body is not a payload: %v: %s", err, body)
		}
		r.mu.Lock()
		r.got = append(r.got, d)
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// deliveries returns a copy of what arrived.
func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// waitEvents waits until the deliveries of run include every event of
// want (as "event task#try"), and returns them in arrival order.
func (r *receiver) waitEvents(timeout time.Duration, run int64, want ...string) []delivery {
	r.t.Helper()
	var mine []delivery
	waitFor(r.t, timeout, func() bool {
		mine = mine[:0]
		seen := map[string]bool{}
		for _, d := range r.deliveries() {
			if d.Payload.RunID == run {
				mine = append(mine, d)
				seen[eventKey(d.Payload)] = true
			}
		}
		for _, w := range want {
			if !seen[w] {
				return false
			}
		}
		return true
	}, fmt.Sprintf("the receiver got %v of run %d", want, run))
	return mine
}

// eventKey names a payload's event: "run_failed" or "task_failed a#1".
func eventKey(p protocol.WebhookPayload) string {
	if p.TaskID == "" {
		return string(p.Event)
	}
	return fmt.Sprintf("%s %s#%d", p.Event, p.TaskID, p.TryNumber)
}

// hmacOf is what a receiver computes to check Vigil-Signature.
func hmacOf(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// setWebhook runs `vigil webhooks set` against url with extra flags.
func setWebhook(t *testing.T, env []string, name, url string, extra ...string) {
	t.Helper()
	r := runVigil(t, env, append([]string{"webhooks", "set", name, "--url", url}, extra...)...)
	require.Equal(t, 0, r.Code, "webhooks set: %s %s", r.Stdout, r.Stderr)
}

// notifications lists a run's deliveries through the API.
func notifications(t *testing.T, lite *liteProc, run int64) []protocol.Notification {
	t.Helper()
	var list protocol.NotificationList
	getJSON(t, lite, fmt.Sprintf("/v1/notifications?run_id=%d", run), &list)
	return list.Notifications
}

// An agent killed -9 mid-try: the try fails agent_lost, and the receiver
// gets task_failed, then run_failed, each with its reason and the run's
// console link, signed with the webhook's secret.
func TestNotifyAgentKilled(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "killed", `
dag_id: killed
notify:
  - on: [task_failed, run_failed]
    webhook: oncall
tasks:
  - id: sleeper
    command: ["sleep", "60"]
`)
	lite := startLite(t, liteOpts{Agents: 0, Extra: append([]string{"--external-url", "https://vigil.example.com/"}, shortRecovery...)})
	env := []string{"VIGIL_SERVER=" + lite.URL, "VIGIL_TOKEN=" + operatorToken}
	rcv := newReceiver(t)
	secret := []byte("oncall-signing-secret")
	secretFile := filepath.Join(t.TempDir(), "oncall.secret")
	require.NoError(t, os.WriteFile(secretFile, append(secret, '\n'), 0o600))
	setWebhook(t, env, "oncall", rcv.srv.URL+"/hook", "--secret-file", secretFile)
	require.Equal(t, 0, runVigil(t, env, "dags", "apply", filepath.Join(dags, "killed.yaml")).Code)
	agent := startAgent(t, []string{lite.URL}, agentToken, "victim", "--kill-grace", killGrace.String())
	agentID(t, agent, 30*time.Second)

	run, code := triggerJSON(t, lite, "killed", false)
	require.Equal(t, 0, code)
	waitTI(t, lite, run.ID, "sleeper", 30*time.Second, "running with started_at", func(ti protocol.TaskInstance) bool {
		return ti.State == "running" && ti.StartedAt != nil
	})
	agent.killHard(t)

	got := rcv.waitEvents(30*time.Second, run.ID, "task_failed sleeper#1", "run_failed")
	require.Len(t, got, 2, "one delivery each: %+v", got)
	assert.Equal(t, "task_failed sleeper#1", eventKey(got[0].Payload), "the try's failure first")
	assert.Equal(t, "run_failed", eventKey(got[1].Payload))
	link := fmt.Sprintf("https://vigil.example.com/#/runs/%d", run.ID)
	for _, d := range got {
		p := d.Payload
		assert.Equal(t, "agent_lost", p.Reason, "%s", d.Body)
		assert.Equal(t, "failed", p.State)
		assert.Equal(t, "killed", p.DAGID)
		assert.Equal(t, link, p.URL)
		assert.NotEmpty(t, p.Message)
		assert.Equal(t, d.ID, p.DeliveryID, "the header and the body carry one delivery id")
		assert.Equal(t, hmacOf(secret, d.Body), d.Signature, "signed with the webhook's secret over the raw body")
		assert.NotEqual(t, hmacOf([]byte("another secret"), d.Body), d.Signature)
	}
	waitFor(t, 10*time.Second, func() bool {
		ns := notifications(t, lite, run.ID)
		return len(ns) == 2 && ns[0].State == "delivered" && ns[1].State == "delivered"
	}, "both notifications recorded delivered")
	out, code := cli(t, lite, "notifications", "list", "--run", fmt.Sprint(run.ID))
	require.Equal(t, 0, code)
	assert.Contains(t, out, "task_failed")
	assert.Contains(t, out, "delivered")
	assert.NotContains(t, out, string(secret))
}

// The receiver is down (503) until every notification of a run has been
// refused at least twice, then up: each event arrives, at least once,
// under one delivery id; duplicates, if any, share it.
func TestNotifyReceiverDownThenUp(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "flaky", `
dag_id: flaky
notify:
  - on: [task_failed, task_retried, run_failed]
    webhook: pager
tasks:
  - id: f
    retries: 1
    command: ["sh", "-c", "exit 3"]
`)
	rcv := newReceiver(t)
	rcv.down.Store(true)
	lite := startLite(t, liteOpts{Agents: 1, Extra: []string{"--notify-retry-delay", "100ms"}})
	env := []string{"VIGIL_SERVER=" + lite.URL, "VIGIL_TOKEN=" + operatorToken}
	setWebhook(t, env, "pager", rcv.srv.URL)
	require.Equal(t, 0, runVigil(t, env, "dags", "apply", filepath.Join(dags, "flaky.yaml")).Code)
	run, code := triggerJSON(t, lite, "flaky", false)
	require.Equal(t, 0, code)
	waitRunState(t, lite, run.ID, "failed", 30*time.Second)

	want := []string{"task_failed f#1", "task_retried f#1", "task_failed f#2", "run_failed"}
	waitFor(t, 30*time.Second, func() bool {
		ns := notifications(t, lite, run.ID)
		if len(ns) != len(want) {
			return false
		}
		for _, n := range ns {
			if n.State != "pending" || n.Attempts < 2 || !strings.HasPrefix(n.LastError, "HTTP 503") {
				return false
			}
		}
		return true
	}, "every notification refused twice while the receiver is down")
	t.Logf("receiver refused %d posts while down; back up", rcv.refused.Load())
	rcv.down.Store(false)

	got := rcv.waitEvents(30*time.Second, run.ID, want...)
	ids := map[string]string{} // event key -> delivery id
	for _, d := range got {
		k := eventKey(d.Payload)
		if prev, ok := ids[k]; ok {
			assert.Equal(t, prev, d.ID, "a duplicate of %s shares its delivery id", k)
		}
		ids[k] = d.ID
	}
	assert.Len(t, ids, len(want), "exactly the run's events: %v", ids)
	seen := map[string]bool{}
	for _, id := range ids {
		assert.False(t, seen[id], "one delivery id per event: %v", ids)
		seen[id] = true
	}
	waitFor(t, 10*time.Second, func() bool {
		for _, n := range notifications(t, lite, run.ID) {
			if n.State != "delivered" {
				return false
			}
		}
		return true
	}, "every notification recorded delivered")
	assert.Contains(t, metricsText(t, lite), `vigil_notification_deliveries_total{result="failed"}`)

	// The console's Notifications page shows each delivery, its attempts
	// and its last state; the dead filter shows none.
	b := startBrowser(t)
	b.signIn(lite.URL, operatorToken, "operator")
	for _, id := range ids {
		b.open(lite.URL, "#/notifications", fmt.Sprintf(`tr[data-delivery=%q] [data-state="delivered"]`, id))
	}
	assert.Equal(t, len(want), b.count("#notifications tbody tr[data-delivery]"))
	assert.Contains(t, b.text("#notifications tbody"), "flaky #"+fmt.Sprint(run.ID))
	b.shot("notifications")
	b.open(lite.URL, "#/notifications?state=dead", `#notifications tbody td.muted`)
	assert.Contains(t, b.text("#notifications tbody"), "No notification is dead.")
}

// A Pro leader is killed -9 after the state change committed its
// notification and before the delivery: the test hook holds r1's
// delivery of the due batch (testhook.EnvHoldDelivery); once r1 holds
// it, r1 dies, r2 leads and delivers.
func TestNotifyProLeaderKilledBeforeDelivery(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	dbURL := storetest.DB(t)
	bin, err := testHookBin()
	require.NoError(t, err, "build vigil with the test hooks")
	marker := filepath.Join(t.TempDir(), "delivery-held")
	r1 := startReplicaBin(t, bin, "r1", dbURL, etcd, []string{testhook.EnvHoldDelivery + "=" + marker})
	waitFor(t, readyTimeout, func() bool { h, ok := r1.health(); return ok && h.Leader != nil && h.Leader.Leading }, "r1 leads")
	r2 := startReplica(t, "r2", dbURL, etcd, nil)
	waitFor(t, readyTimeout, func() bool { _, ok := r2.health(); return ok }, "r2 serving")
	api := &liteProc{URL: r2.url}
	env := []string{"VIGIL_SERVER=" + r2.url, "VIGIL_TOKEN=" + operatorToken}
	rcv := newReceiver(t)
	setWebhook(t, env, "oncall", rcv.srv.URL)
	spec := writeDAG(t, t.TempDir(), "boom", `
dag_id: boom
notify:
  - on: [task_failed, run_failed]
    webhook: oncall
tasks:
  - id: b
    command: ["sh", "-c", "exit 7"]
`)
	require.Equal(t, 0, runVigil(t, env, "dags", "apply", spec).Code)
	startAgent(t, []string{r1.url, r2.url}, agentToken, "worker")
	run := triggerRun(t, env, "boom")
	waitRunState(t, api, run, "failed", 30*time.Second)

	waitFor(t, 20*time.Second, func() bool { return fileExists(marker) }, "r1 holds the delivery of the due notifications")
	ns := notifications(t, api, run)
	require.Len(t, ns, 2, "the state changes committed their notifications: %+v", ns)
	for _, n := range ns {
		assert.Equal(t, "pending", string(n.State))
	}
	assert.Empty(t, rcv.deliveries(), "nothing posted while r1 holds it")
	r1.p.kill(t)
	t.Logf("killed r1 -9 while it held the delivery (%s)", strings.TrimSpace(readFile(t, marker)))

	got := rcv.waitEvents(30*time.Second, run, "task_failed b#1", "run_failed")
	for _, d := range got {
		assert.Equal(t, "exit_code", d.Payload.Reason)
	}
	h, ok := r2.health()
	require.True(t, ok)
	assert.True(t, h.Leader != nil && h.Leader.Leading, "r2 leads and delivered")
}

// A DAG with sla: 2s whose task sleeps 5s: exactly one sla_missed, as an
// event on the run, a notification and a metric.
func TestNotifySLAMissed(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "slow", `
dag_id: slow
sla: 2s
notify:
  - on: [sla_missed, run_succeeded]
    webhook: sla
tasks:
  - id: s
    command: ["sleep", "5"]
`)
	rcv := newReceiver(t)
	lite := startLite(t, liteOpts{Agents: 1})
	env := []string{"VIGIL_SERVER=" + lite.URL, "VIGIL_TOKEN=" + operatorToken}
	setWebhook(t, env, "sla", rcv.srv.URL)
	require.Equal(t, 0, runVigil(t, env, "dags", "apply", filepath.Join(dags, "slow.yaml")).Code)
	run, code := triggerJSON(t, lite, "slow", false)
	require.Equal(t, 0, code)

	got := rcv.waitEvents(40*time.Second, run.ID, "sla_missed", "run_succeeded")
	// The run has ended: no later pass can raise it again.
	misses := 0
	for _, d := range got {
		if d.Payload.Event == "sla_missed" {
			misses++
			assert.Equal(t, "running", d.Payload.State)
			assert.Contains(t, d.Payload.Message, "not finished by its SLA deadline")
		}
	}
	assert.Equal(t, 1, misses, "one sla_missed delivery: %+v", got)
	kinds := 0
	for _, e := range runEvents(t, lite, run.ID) {
		if e.Kind == "sla_missed" {
			kinds++
		}
	}
	assert.Equal(t, 1, kinds, "one sla_missed event on the run")
	var rows int
	for _, n := range notifications(t, lite, run.ID) {
		if n.Event == "sla_missed" {
			rows++
		}
	}
	assert.Equal(t, 1, rows, "one sla_missed notification")
	assert.Contains(t, metricsText(t, lite), "vigil_sla_missed_total 1\n")
}

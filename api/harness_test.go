package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/identity"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/notify"
	"github.com/vigil-sched/vigil/scheduler"
	"github.com/vigil-sched/vigil/secrets"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const (
	agentToken  = "agent-secret"
	opToken     = "operator-secret"
	viewerToken = "viewer-secret"
	// The harness's users file: one identity of each role.
	aliceToken = "alice-secret-operator" // alice, operator
	adaToken   = "ada-secret-admin"      // ada, admin
	veraToken  = "vera-secret-viewer"    // vera, viewer
)

// harnessUsers writes the harness's users file and loads it.
func harnessUsers(t *testing.T) *identity.Set {
	t.Helper()
	body := ""
	for _, u := range []struct{ name, role, token string }{
		{"alice", "operator", aliceToken}, {"ada", "admin", adaToken}, {"vera", "viewer", veraToken},
	} {
		body += fmt.Sprintf("- name: %s\n  role: %s\n  token_sha256: %s\n", u.name, u.role, identity.SumHex(u.token))
	}
	path := filepath.Join(t.TempDir(), "users.yaml")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	users, err := identity.Load(path, nil)
	require.NoError(t, err)
	return users
}

// harness is a real control plane on a private database: store, listener,
// scheduler leading under a static elector, and the API on httptest.
type harness struct {
	t       *testing.T
	store   *store.Store
	metrics *metrics.Metrics
	srv     *httptest.Server
	lis     *store.Listener
	log     *slog.Logger
	dbURL   string // the harness's private database, for tests that age rows

	credMu sync.Mutex
	creds  map[int64]string // agent id → the credential its registration returned
}

type harnessOpts struct {
	noScheduler bool
	// logs, when set, also receives the control plane's log (JSON, Warn
	// and above), for tests of what is logged.
	logs io.Writer
	// signIn overrides the sign-in throttle.
	signIn    api.SignInLimit
	noSecrets bool // start without a secrets key
}

// testSecretsKey is the harness's secrets key.
var testSecretsKey = bytes.Repeat([]byte{0x5e}, secrets.KeyBytes)

func newHarness(t *testing.T, opts harnessOpts) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	url := storetest.DB(t)
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if os.Getenv("VIGIL_TEST_VERBOSE") != "" {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.logs != nil {
		log = slog.New(slog.NewJSONHandler(io.MultiWriter(testWriter{t}, opts.logs), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	m := metrics.New()
	lis := st.Listen(ctx, log, store.ChanScheduler, store.ChanQueued, store.ChanStop)
	sched, err := scheduler.New(scheduler.Config{Store: st, Listener: lis, Metrics: m, Logger: log, Interval: 50 * time.Millisecond})
	require.NoError(t, err)
	el := leader.NewStatic(st, "test", log, m)
	var box *secrets.Box
	if !opts.noSecrets {
		box, err = secrets.NewBox(testSecretsKey)
		require.NoError(t, err)
		require.NoError(t, st.CheckSecretsKey(ctx, box.Verifier, box.CheckVerifier, false))
	}
	notifyCfg := notify.Config{Store: st, Metrics: m, Logger: log, Secrets: box}
	require.NoError(t, notifyCfg.Validate())
	srv, err := api.New(api.Config{
		Store: st, Listener: lis, Metrics: m, Logger: log, AgentToken: agentToken, OperatorToken: opToken, ViewerToken: viewerToken,
		HeartbeatInterval: time.Second, Control: sched, LeaderStatus: el.Status, SignIn: opts.signIn, Secrets: box,
		Notify: notify.NewDeliverer(notifyCfg),
		Users:  harnessUsers(t),
	})
	require.NoError(t, err)
	hs := httptest.NewServer(conformReplies(t, srv.Handler()))
	done := make(chan struct{})
	if !opts.noScheduler {
		go func() {
			defer close(done)
			_ = el.Run(ctx, leader.Callbacks{OnStartedLeading: sched.Lead})
		}()
	} else {
		close(done)
	}
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		<-done
		lis.Close()
		st.Close()
	})
	return &harness{t: t, store: st, metrics: m, srv: hs, lis: lis, log: log, dbURL: url, creds: map[int64]string{}}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// agentPath matches the endpoints that act for one agent.
var agentPath = regexp.MustCompile(`^/v1/agents/(\d+)/`)

// call sends a JSON request with token and decodes a 2xx body into out.
// It returns the status code and the error body for non-2xx replies. With
// the agent token, a request under /v1/agents/{id}/ carries the credential
// h.register got for that agent, as the agent itself would send it.
func (h *harness) call(method, path, token string, body, out any) (int, protocol.ErrorDetail) {
	h.t.Helper()
	cred := ""
	if m := agentPath.FindStringSubmatch(path); m != nil && token == agentToken {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		cred = h.credential(id)
	}
	return h.callCred(method, path, token, cred, body, out)
}

// credential returns the credential h.register got for agentID, "" if none.
func (h *harness) credential(agentID int64) string {
	h.credMu.Lock()
	defer h.credMu.Unlock()
	return h.creds[agentID]
}

// callCred is call with an explicit Vigil-Agent-Credential header ("":
// none).
func (h *harness) callCred(method, path, token, cred string, body, out any) (int, protocol.ErrorDetail) {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(h.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	require.NoError(h.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if cred != "" {
		req.Header.Set(protocol.HeaderAgentCredential, cred)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	if resp.StatusCode >= 300 {
		var eb protocol.ErrorBody
		_ = json.Unmarshal(raw, &eb)
		return resp.StatusCode, eb.Error
	}
	if out != nil && len(raw) > 0 {
		require.NoError(h.t, json.Unmarshal(raw, out), string(raw))
	}
	return resp.StatusCode, protocol.ErrorDetail{}
}

// applyDAG stores a spec given as YAML.
func (h *harness) applyDAG(yaml string) {
	h.t.Helper()
	spec, err := dag.Parse([]byte(yaml))
	require.NoError(h.t, err)
	_, err = h.store.ApplyDAG(context.Background(), spec)
	require.NoError(h.t, err)
}

func (h *harness) trigger(dagID string) int64 {
	h.t.Helper()
	run, err := h.store.TriggerRun(context.Background(), dagID)
	require.NoError(h.t, err)
	return run.ID
}

func (h *harness) register(name string, tags []string, capacity int) int64 {
	h.t.Helper()
	var resp protocol.RegisterResponse
	code, e := h.call("POST", "/v1/agents/register", agentToken,
		protocol.RegisterRequest{Name: name, Tags: tags, Capacity: capacity}, &resp)
	require.Equal(h.t, 200, code, e.Message)
	require.NotEmpty(h.t, resp.Credential, "register returns the agent's credential")
	h.credMu.Lock()
	h.creds[resp.AgentID] = resp.Credential
	h.credMu.Unlock()
	return resp.AgentID
}

func (h *harness) claim(agentID int64, slots int, wait time.Duration) []protocol.ClaimedTask {
	h.t.Helper()
	var resp protocol.ClaimResponse
	code, e := h.call("POST", fmt.Sprintf("/v1/agents/%d/claim", agentID), agentToken,
		protocol.ClaimRequest{Slots: slots, Wait: protocol.Duration(wait)}, &resp)
	require.Equal(h.t, 200, code, e.Message)
	return resp.Tasks
}

func (h *harness) complete(agentID int64, task protocol.ClaimedTask, outcome state.Outcome, exit int) (int, protocol.ErrorDetail) {
	h.t.Helper()
	return h.call("POST", fmt.Sprintf("/v1/agents/%d/complete", agentID), agentToken,
		protocol.CompleteRequest{Attempt: task.Attempt, Outcome: outcome, ExitCode: &exit}, nil)
}

func (h *harness) run(id int64) store.RunDetail {
	h.t.Helper()
	d, err := h.store.GetRun(context.Background(), id)
	require.NoError(h.t, err)
	return d
}

// waitRun polls until the run reaches a terminal state or the timeout.
func (h *harness) waitRun(id int64, timeout time.Duration) store.RunDetail {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d := h.run(id)
		if d.State.Terminal() {
			return d
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("run %d still %s after %s: %+v", id, d.State, timeout, d.TaskInstances)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tiState returns the state of task taskID in run id.
func (h *harness) ti(id int64, taskID string) store.TaskInstance {
	h.t.Helper()
	for _, ti := range h.run(id).TaskInstances {
		if ti.TaskID == taskID {
			return ti
		}
	}
	h.t.Fatalf("run %d has no task %q", id, taskID)
	return store.TaskInstance{}
}

// waitTI polls until task taskID of run id is in state want.
func (h *harness) waitTI(id int64, taskID string, want state.TI, timeout time.Duration) store.TaskInstance {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ti := h.ti(id, taskID)
		if ti.State == want {
			return ti
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("task %s of run %d is %s, want %s after %s", taskID, id, ti.State, want, timeout)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

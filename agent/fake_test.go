package agent

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

const fakeToken = "agent-secret"

// Outage modes of the fake control plane.
const (
	modeUp   = ""
	mode503  = "503"  // every request gets 503 unavailable
	modeDrop = "drop" // connections are closed without a reply
)

// fakeAPI implements the agent protocol (docs/design.md §4) in memory. Several
// httptest servers may share one fakeAPI, like replicas sharing a database.
type fakeAPI struct {
	t  *testing.T
	mu sync.Mutex

	mode        string
	nextAgent   int64
	nextTI      int64
	agents      map[int64]bool
	registers   []protocol.RegisterRequest
	queue       []protocol.ClaimedTask
	heartbeats  []protocol.HeartbeatRequest
	started     map[string]bool
	completes   []protocol.CompleteRequest // accepted
	completeHit map[string]int             // complete calls per attempt, also refused
	batches     []int                      // the size of each batch request
	claims      []int                      // the slots of each claim request
	deregs      []int64                    // the agent id of each deregistration
	// holdBatch, when set, makes the batch route wait for a value (or
	// its closing) before it answers: a batch held in flight.
	holdBatch chan struct{}
	// holdHeartbeat, when set, makes the heartbeat route count the
	// request in heldHeartbeats and wait for a value (or its closing)
	// before it records and answers it: a heartbeat held in flight.
	holdHeartbeat  chan struct{}
	heldHeartbeats int
	noBatches      bool // serve no batch route: an older server
	// interval, when set, is the heartbeat interval the register reply
	// announces (15 s otherwise); with it the agent's request timeout.
	interval time.Duration
	logs     map[string][]protocol.LogLine
	// logsHook, when set, sees every log batch after it is stored and
	// before the reply; returning true closes the connection instead of
	// replying: the batch landed but the agent never hears so.
	logsHook func(lines []protocol.LogLine) (loseReply bool)
	// failLogs, when set, sees every log batch first, with mu held;
	// returning true answers 503 without storing it.
	failLogs  func(lines []protocol.LogLine) bool
	stop      map[string]state.StopReason // attempt -> reason, sent in the next heartbeat reply
	terminate map[string]state.StopReason // attempt -> reason, sent in the next register reply
	stale     map[string]bool
	// failNext makes the next completions answer code internal, as a
	// replica does whose database went away mid-request.
	failNext int
}

func newFakeAPI(t *testing.T) *fakeAPI {
	return &fakeAPI{
		t: t, agents: map[int64]bool{}, started: map[string]bool{}, completeHit: map[string]int{},
		logs: map[string][]protocol.LogLine{}, stop: map[string]state.StopReason{}, terminate: map[string]state.StopReason{},
		stale: map[string]bool{},
	}
}

// serve starts one replica and returns its URL.
func (f *fakeAPI) serve() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/register", f.wrap(false, f.register))
	mux.HandleFunc("POST /v1/agents/{id}/claim", f.wrap(true, f.claim))
	mux.HandleFunc("POST /v1/agents/{id}/heartbeat", f.wrap(true, f.heartbeat))
	mux.HandleFunc("POST /v1/agents/{id}/complete", f.wrap(true, f.complete))
	mux.HandleFunc("POST /v1/agents/{id}/completions", f.wrap(true, f.completions))
	mux.HandleFunc("POST /v1/agents/{id}/logs", f.wrap(true, f.logsHandler))
	mux.HandleFunc("POST /v1/agents/{id}/deregister", f.wrap(true, f.deregister))
	mux.HandleFunc("POST /v1/agents/{id}/stops", f.wrap(true, f.stopWatch))
	srv := httptest.NewServer(mux)
	f.t.Cleanup(srv.Close)
	return srv
}

type handler func(w http.ResponseWriter, r *http.Request) any

// wrap applies the outage mode, authentication and the agent check.
func (f *fakeAPI) wrap(agentPath bool, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		mode := f.mode
		f.mu.Unlock()
		switch mode {
		case mode503:
			writeErr(w, http.StatusServiceUnavailable, protocol.CodeUnavailable, "database unreachable")
			return
		case modeDrop:
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+fakeToken {
			writeErr(w, http.StatusUnauthorized, protocol.CodeUnauthorized, "bad token")
			return
		}
		if agentPath {
			id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
			f.mu.Lock()
			known := f.agents[id]
			f.mu.Unlock()
			if !known {
				writeErr(w, http.StatusNotFound, protocol.CodeNotFound, "agent not found")
				return
			}
		}
		if out := h(w, r); out != nil {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(out)
		}
	}
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(protocol.ErrorBody{Error: protocol.ErrorDetail{Code: code, Message: msg}})
}

func decode[T any](r *http.Request) T {
	var v T
	if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
		panic(err)
	}
	return v
}

func (f *fakeAPI) register(w http.ResponseWriter, r *http.Request) any {
	req := decode[protocol.RegisterRequest](r)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextAgent++
	f.agents[f.nextAgent] = true
	f.registers = append(f.registers, req)
	interval := 15 * time.Second
	if f.interval > 0 {
		interval = f.interval
	}
	resp := protocol.RegisterResponse{AgentID: f.nextAgent, HeartbeatInterval: protocol.Duration(interval), ServerTime: time.Now()}
	for _, at := range req.InFlight {
		if reason, ok := f.terminate[at.AttemptID]; ok {
			resp.Terminate = append(resp.Terminate, protocol.StopOrder{Attempt: at.Attempt, Reason: reason})
			delete(f.terminate, at.AttemptID)
		}
	}
	return resp
}

func (f *fakeAPI) claim(w http.ResponseWriter, r *http.Request) any {
	req := decode[protocol.ClaimRequest](r)
	f.mu.Lock()
	f.claims = append(f.claims, req.Slots)
	f.mu.Unlock()
	deadline := time.Now().Add(req.Wait.D())
	for {
		f.mu.Lock()
		if f.mode != modeUp {
			f.mu.Unlock()
			writeErr(w, http.StatusServiceUnavailable, protocol.CodeUnavailable, "going down")
			return nil
		}
		n := min(req.Slots, len(f.queue))
		tasks := slices.Clone(f.queue[:n])
		f.queue = f.queue[n:]
		f.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			return protocol.ClaimResponse{Tasks: tasks}
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (f *fakeAPI) heartbeat(w http.ResponseWriter, r *http.Request) any {
	req := decode[protocol.HeartbeatRequest](r)
	f.mu.Lock()
	hold := f.holdHeartbeat
	if hold != nil {
		f.heldHeartbeats++
		f.mu.Unlock()
		<-hold
		f.mu.Lock()
	}
	defer f.mu.Unlock()
	f.heartbeats = append(f.heartbeats, req)
	resp := protocol.HeartbeatResponse{ServerTime: time.Now()}
	for _, e := range req.Entries {
		if e.Started {
			f.started[e.AttemptID] = true
		}
		if reason, ok := f.stop[e.AttemptID]; ok {
			resp.Stop = append(resp.Stop, protocol.StopOrder{Attempt: e.Attempt, Reason: reason})
			delete(f.stop, e.AttemptID)
		}
	}
	return resp
}

func (f *fakeAPI) complete(w http.ResponseWriter, r *http.Request) any {
	req := decode[protocol.CompleteRequest](r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if e := f.completeLocked(req); e != nil {
		writeErr(w, http.StatusConflict, e.Code, e.Message)
		return nil
	}
	return protocol.CompleteResponse{State: string(req.Outcome)}
}

// completions is the batch route: each item judged as complete judges it.
func (f *fakeAPI) completions(w http.ResponseWriter, r *http.Request) any {
	req := decode[protocol.CompleteBatchRequest](r)
	f.mu.Lock()
	hold, none := f.holdBatch, f.noBatches
	f.mu.Unlock()
	if none {
		writeErr(w, http.StatusNotFound, protocol.CodeNotFound, "no route for "+r.Method+" "+r.URL.Path)
		return nil
	}
	if hold != nil {
		<-hold
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, len(req.Completions))
	var resp protocol.CompleteBatchResponse
	for _, c := range req.Completions {
		res := protocol.CompletionResult{Attempt: c.Attempt, State: string(c.Outcome)}
		if res.Error = f.completeLocked(c); res.Error != nil {
			res.State = ""
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}

// completeLocked records one completion, or refuses a stale one.
func (f *fakeAPI) completeLocked(req protocol.CompleteRequest) *protocol.ErrorDetail {
	f.completeHit[req.AttemptID]++
	if f.failNext > 0 {
		f.failNext--
		return &protocol.ErrorDetail{Code: protocol.CodeInternal, Message: "terminating connection due to administrator command (SQLSTATE 57P01)"}
	}
	if f.stale[req.AttemptID] {
		return &protocol.ErrorDetail{Code: protocol.CodeStaleAttempt, Message: "attempt superseded"}
	}
	f.completes = append(f.completes, req)
	return nil
}

func (f *fakeAPI) logsHandler(w http.ResponseWriter, r *http.Request) any {
	req := decode[protocol.LogsRequest](r)
	f.mu.Lock()
	if f.failLogs != nil && f.failLogs(req.Lines) {
		f.mu.Unlock()
		writeErr(w, http.StatusServiceUnavailable, protocol.CodeUnavailable, "database unreachable")
		return nil
	}
	for _, l := range req.Lines {
		f.logs[l.AttemptID] = append(f.logs[l.AttemptID], l)
	}
	hook := f.logsHook
	f.mu.Unlock()
	if hook != nil && hook(req.Lines) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
		return nil
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// setLogsHook installs (or, with nil, removes) the logsHook.
func (f *fakeAPI) setLogsHook(h func(lines []protocol.LogLine) (loseReply bool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logsHook = h
}

// --- test-side helpers ---

func (f *fakeAPI) setMode(m string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.setModeLocked(m)
}

func (f *fakeAPI) setModeLocked(m string) { f.mode = m }

// failLogsWith installs (or, with nil, removes) failLogs.
func (f *fakeAPI) failLogsWith(h func(lines []protocol.LogLine) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failLogs = h
}

// arrivals is the attempt's lines in the order the fake first stored
// them, each once.
func (f *fakeAPI) arrivals(attemptID string) []protocol.LogLine {
	f.mu.Lock()
	defer f.mu.Unlock()
	seen := map[int64]bool{}
	var out []protocol.LogLine
	for _, l := range f.logs[attemptID] {
		if !seen[l.Seq] {
			seen[l.Seq] = true
			out = append(out, l)
		}
	}
	return out
}

// enqueue queues a task for the next claim and returns it.
func (f *fakeAPI) enqueue(timeout time.Duration, env map[string]string, command ...string) protocol.ClaimedTask {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextTI++
	t := protocol.ClaimedTask{
		Attempt: protocol.Attempt{TIID: f.nextTI, AttemptID: uuid.NewString()},
		RunID:   7, DAGID: "etl", TaskID: fmt.Sprintf("task%d", f.nextTI), TryNumber: 1,
		Command: command, Env: env, ExecutionTimeout: protocol.Duration(timeout),
	}
	f.queue = append(f.queue, t)
	return t
}

func (f *fakeAPI) completion(attemptID string) (protocol.CompleteRequest, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.completes {
		if c.AttemptID == attemptID {
			return c, true
		}
	}
	return protocol.CompleteRequest{}, false
}

// waitCompletion waits for the accepted completion of attemptID.
func (f *fakeAPI) waitCompletion(attemptID string, within time.Duration) protocol.CompleteRequest {
	var got protocol.CompleteRequest
	require.Eventually(f.t, func() bool {
		var ok bool
		got, ok = f.completion(attemptID)
		return ok
	}, within, 10*time.Millisecond, "no completion for %s", attemptID)
	return got
}

func (f *fakeAPI) isStarted(attemptID string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started[attemptID]
}

// lines returns the attempt's log lines as stored: deduplicated by seq
// (replays are idempotent) and ordered by seq.
func (f *fakeAPI) lines(attemptID string) []protocol.LogLine {
	f.mu.Lock()
	defer f.mu.Unlock()
	bySeq := map[int64]protocol.LogLine{}
	for _, l := range f.logs[attemptID] {
		if _, dup := bySeq[l.Seq]; !dup {
			bySeq[l.Seq] = l
		}
	}
	out := make([]protocol.LogLine, 0, len(bySeq))
	for _, l := range bySeq {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b protocol.LogLine) int { return int(a.Seq - b.Seq) })
	return out
}

func (f *fakeAPI) registrations() []protocol.RegisterRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.registers)
}

// deadURL returns a URL on which nothing listens.
func deadURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "http://" + addr
}

// heartbeatsAfter runs send and returns the heartbeats received from its
// start to its end (the agent's own loop may add some meanwhile).
func (f *fakeAPI) heartbeatsAfter(send func()) []protocol.HeartbeatRequest {
	f.mu.Lock()
	mark := len(f.heartbeats)
	f.mu.Unlock()
	send()
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.heartbeats[mark:])
}

// deregister records the agent's deregistration (its stop) and answers
// 204, as the API does.
func (f *fakeAPI) deregister(w http.ResponseWriter, r *http.Request) any {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	f.mu.Lock()
	f.deregs = append(f.deregs, id)
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// stopWatch is the agent's stop watch: it holds the request for its wait
// (or until the client goes) and answers stop false; the fake's stop
// orders travel in heartbeat replies only.
func (f *fakeAPI) stopWatch(w http.ResponseWriter, r *http.Request) any {
	req := decode[protocol.StopWatchRequest](r)
	t := time.NewTimer(req.Wait.D())
	defer t.Stop()
	select {
	case <-r.Context().Done():
		return nil
	case <-t.C:
	}
	return protocol.StopWatchResponse{}
}

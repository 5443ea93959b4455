package agent

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/reaper"
)

// freezable is one replica of a fakeAPI that can be frozen like a
// SIGSTOPped process: while frozen, every request (new or already parked,
// such as a claim long poll) hangs without a reply, on a connection that
// stays open. It announces interval in its register replies.
type freezable struct {
	*httptest.Server
	mu     sync.Mutex
	gate   chan struct{} // closed while not frozen
	frozen bool
}

func serveFreezable(t *testing.T, f *fakeAPI, interval time.Duration) *freezable {
	fr := &freezable{gate: make(chan struct{})}
	close(fr.gate)
	register := func(w http.ResponseWriter, r *http.Request) any {
		out := f.register(w, r)
		if resp, ok := out.(protocol.RegisterResponse); ok {
			resp.HeartbeatInterval = protocol.Duration(interval)
			return resp
		}
		return out
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/agents/register", f.wrap(false, register))
	mux.HandleFunc("POST /v1/agents/{id}/claim", f.wrap(true, f.claim))
	mux.HandleFunc("POST /v1/agents/{id}/heartbeat", f.wrap(true, f.heartbeat))
	mux.HandleFunc("POST /v1/agents/{id}/complete", f.wrap(true, f.complete))
	mux.HandleFunc("POST /v1/agents/{id}/logs", f.wrap(true, f.logsHandler))
	fr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fr.mu.Lock()
		gate := fr.gate
		fr.mu.Unlock()
		<-gate // frozen: hang, like a stopped process, until thawed
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(fr.Server.Close)
	t.Cleanup(fr.thaw) // runs first: lets hung handlers return so Close can finish
	return fr
}

func (fr *freezable) freeze() {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if !fr.frozen {
		fr.frozen, fr.gate = true, make(chan struct{})
	}
}

func (fr *freezable) thaw() {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if fr.frozen {
		fr.frozen = false
		close(fr.gate)
	}
}

// TestRequestTimeoutMatchesServerRule: the agent and the control plane's
// validation (reaper.AgentRequestTimeout) use one rule for the request
// timeout, so the failover bound the server validates is the agent's.
func TestRequestTimeoutMatchesServerRule(t *testing.T) {
	t.Parallel()
	for _, iv := range []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, time.Minute} {
		assert.Equal(t, reaper.AgentRequestTimeout(iv), RequestTimeout(iv), "interval %s", iv)
	}
	assert.Equal(t, MaxRequestTimeout, reaper.MaxAgentRequestTimeout)
	assert.Equal(t, MaxRequestTimeout, RequestTimeout(0), "before the first register reply")
}

// TestFrozenReplicaFailsOverWithinBound is the agent side of
// the failover timing rule: the replica the agent is attached to freezes (requests hang on
// open connections, nothing is refused). With the announced heartbeat
// interval I, the agent must be registered with the next replica, carrying
// its running attempt, within I (the next heartbeat) + 2 × RequestTimeout(I)
// (the failover bound), and a claim long poll parked on the frozen replica
// (ClaimWait 30 s) must not keep new work from starting on the next one.
// Before the fix the heartbeat waited a fixed 15 s.
func TestFrozenReplicaFailsOverWithinBound(t *testing.T) {
	t.Parallel()
	const interval = 500 * time.Millisecond
	f := newFakeAPI(t)
	a1 := serveFreezable(t, f, interval)
	a2 := serveFreezable(t, f, interval)
	a := startAgent(t, []string{a1.URL, a2.URL}, func(c *Config) {
		c.HeartbeatInterval = 0 // the server's
		c.ClaimWait = 30 * time.Second
	})
	task := f.enqueue(0, nil, sh("sleep 30")...)
	require.Eventually(t, func() bool { return f.isStarted(task.AttemptID) }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, interval, a.interval())
	assert.Equal(t, interval, a.timeout(), "request timeout = announced heartbeat interval")

	regs := len(f.registrations())
	frozenAt := time.Now()
	a1.freeze()
	bound := interval + 2*RequestTimeout(interval)
	var reg protocol.RegisterRequest
	require.Eventually(t, func() bool {
		r := f.registrations()
		if len(r) > regs {
			reg = r[len(r)-1]
			return true
		}
		return false
	}, bound+time.Second, 10*time.Millisecond, "no register on the next replica within %s + 1s", bound)
	took := time.Since(frozenAt)
	t.Logf("registered with the next replica %s after the freeze (bound %s)", took.Round(time.Millisecond), bound)
	assert.Contains(t, reg.InFlight, protocol.HeartbeatEntry{Attempt: task.Attempt, Started: true}, "the re-register carried the running attempt")
	a.mu.Lock()
	server := a.st.server
	a.mu.Unlock()
	assert.Equal(t, 1, server, "attached to the second replica")

	// A claim parked on the frozen replica was cancelled: new work starts.
	next := f.enqueue(0, nil, sh("true")...)
	f.waitCompletion(next.AttemptID, 3*time.Second)
	assert.Equal(t, 1, a.inFlightCount(), "the first task kept running")
}

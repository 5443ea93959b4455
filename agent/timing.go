package agent

import (
	"context"
	"time"
)

// MaxRequestTimeout caps RequestTimeout: with a heartbeat interval longer
// than this, a request still waits only this long.
const MaxRequestTimeout = 15 * time.Second

// RequestTimeout is how long the agent waits for one request (register,
// heartbeat, completion, log batch; a claim adds its long-poll wait) before
// it counts the replica as failed and moves to its next --server URL: the
// heartbeat interval the control plane announced in the register reply, at
// most MaxRequestTimeout. One timed-out request plus one register on the
// next replica is the agent's failover bound, 2 × RequestTimeout; the
// control plane validates its agent-lost threshold against that bound with
// the same rule (reaper.AgentRequestTimeout, reaper.Thresholds.ValidateTiming),
// so a healthy agent on a frozen replica fails over before it can be reaped.
// A non-positive interval (no register reply yet) gives MaxRequestTimeout.
func RequestTimeout(serverHeartbeatInterval time.Duration) time.Duration {
	if serverHeartbeatInterval <= 0 {
		return MaxRequestTimeout
	}
	return min(serverHeartbeatInterval, MaxRequestTimeout)
}

// timeout is the per-request timeout in effect: RequestTimeout of the
// interval the server announced, with a.reqTimeout in place of
// MaxRequestTimeout. In production the two are equal; tests lower the
// cap to fail over fast, or raise it (with a longer announced interval)
// so that a request a test holds open on purpose never times out.
func (a *Agent) timeout() time.Duration {
	if srv := time.Duration(a.srvInterval.Load()); srv > 0 {
		return min(srv, a.reqTimeout)
	}
	return a.reqTimeout
}

// claimContext derives the context of one claim long-poll made on the
// link registration gen. markDownLocked cancels it when that registration
// fails, so a claim parked on a frozen replica does not hold the agent's
// work back until its own deadline after the agent has failed over.
// Heartbeats use their own connections (a long poll occupies one HTTP/1.1
// connection; the transport opens another for the heartbeat) and their own
// RequestTimeout, so the long poll never holds the heartbeat back.
func (a *Agent) claimContext(ctx context.Context, gen uint64) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancel(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	if gen != a.st.gen || a.st.state != stateUp {
		cancel()
		return cctx, cancel
	}
	a.claimCancel = cancel
	return cctx, cancel
}

// cancelClaimLocked ends the claim long-poll in flight, if any; a.mu held.
func (a *Agent) cancelClaimLocked() {
	if a.claimCancel != nil {
		a.claimCancel()
		a.claimCancel = nil
	}
}

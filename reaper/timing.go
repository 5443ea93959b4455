package reaper

import (
	"fmt"
	"time"
)

// MaxAgentRequestTimeout caps an agent's per-request timeout: a heartbeat
// interval longer than this still lets a request wait only this long.
const MaxAgentRequestTimeout = 15 * time.Second

// AgentRequestTimeout is how long an agent waits for one request
// (register, heartbeat, completion, log batch) to a replica before it
// counts that replica as failed: the heartbeat interval the control plane
// announces, at most MaxAgentRequestTimeout. The agent applies the same
// rule (agent.RequestTimeout); the control plane uses it to validate its
// timing, so the two must agree.
func AgentRequestTimeout(heartbeatInterval time.Duration) time.Duration {
	return min(heartbeatInterval, MaxAgentRequestTimeout)
}

// AgentFailoverBound is the longest an agent takes, once a request to a
// frozen replica was sent, to be registered with the next replica: the
// request times out after one AgentRequestTimeout, the agent moves to its
// next --server URL at once, and that register takes at most another.
func AgentFailoverBound(heartbeatInterval time.Duration) time.Duration {
	return 2 * AgentRequestTimeout(heartbeatInterval)
}

// Timing is what the agent-lost threshold must cover besides the
// thresholds themselves (docs/scheduler-resilience.md, "Timing constraints
// that validation enforces").
type Timing struct {
	// HeartbeatInterval is the interval the control plane announces to
	// agents in the register reply (--heartbeat-interval). Zero skips
	// every rule that involves it.
	HeartbeatInterval time.Duration
	// ElectionTTL is Pro's etcd session TTL (--election-ttl); zero for
	// Lite, which has one replica and no failover, so the failover rule
	// does not apply.
	ElectionTTL time.Duration
}

// FailoverMinimum is the sum the agent-lost threshold must exceed in Pro:
// election TTL + agent failover bound + heartbeat interval. It is 0 when
// the rule does not apply (Lite, or no heartbeat interval).
func (tm Timing) FailoverMinimum() time.Duration {
	if tm.ElectionTTL <= 0 || tm.HeartbeatInterval <= 0 {
		return 0
	}
	return tm.ElectionTTL + AgentFailoverBound(tm.HeartbeatInterval) + tm.HeartbeatInterval
}

// ValidateTiming is Validate(tm.HeartbeatInterval) plus, in Pro, the
// failover rule: a healthy agent attached to a replica that freezes
// (SIGSTOP, a black-holed link) must not be reaped across the failover,
// so the agent-lost threshold must exceed the longest gap between two of
// its recorded heartbeats:
//
//	agent-lost-threshold > election-ttl + 2 × agent request timeout + heartbeat interval
//
// The heartbeat interval is the wait for the next heartbeat, 2 × the
// request timeout the agent's failover (AgentFailoverBound), and the TTL
// bounds how long the frozen leader can delay the new heartbeat's write
// (its sessions' lock and idle-in-transaction timeouts are below the TTL)
// and how long the replicas take to elect its successor. The error states
// the arithmetic with every term and the flag each comes from.
func (t Thresholds) ValidateTiming(tm Timing) error {
	if err := t.Validate(tm.HeartbeatInterval); err != nil {
		return err
	}
	if need := tm.FailoverMinimum(); need > 0 && t.AgentLost <= need {
		return &FieldError{Field: FieldAgentLost, Value: t.AgentLost, Rule: fmt.Sprintf(
			"must exceed the election TTL %s + agent failover bound 2×%s + heartbeat interval %s = %s, "+
				"or a healthy agent attached to a frozen replica is reaped before it has failed over (agent request timeout = heartbeat interval, at most %s)",
			tm.ElectionTTL, AgentRequestTimeout(tm.HeartbeatInterval), tm.HeartbeatInterval, need, MaxAgentRequestTimeout)}
	}
	return nil
}

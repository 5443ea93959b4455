package reaper

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValidateTimingFailoverRule: the combination seen
// in the field, election TTL 3s, heartbeat 1s and agent-lost 4s, let the
// new leader reap a live task before its agent had left the frozen
// replica. It is now refused with the arithmetic; the boundary (6s) is
// refused too, 7s passes, and Lite (no TTL) keeps only the 2 × interval
// rule.
func TestValidateTimingFailoverRule(t *testing.T) {
	t.Parallel()
	th := func(agentLost time.Duration) Thresholds {
		x := DefaultThresholds()
		x.AgentLost = agentLost
		return x
	}
	pro := Timing{HeartbeatInterval: time.Second, ElectionTTL: 3 * time.Second}
	err := th(4 * time.Second).ValidateTiming(pro)
	require.Error(t, err)
	assert.Contains(t, err.Error(),
		"AgentLost: 4s must exceed the election TTL 3s + agent failover bound 2×1s + heartbeat interval 1s = 6s")
	require.Error(t, th(6*time.Second).ValidateTiming(pro), "equal is not enough: the reaper compares strictly")
	require.NoError(t, th(7*time.Second).ValidateTiming(pro))
	assert.Equal(t, 6*time.Second, pro.FailoverMinimum())

	// Lite: one replica, no failover.
	require.NoError(t, th(2*time.Second).ValidateTiming(Timing{HeartbeatInterval: time.Second}))
	assert.Zero(t, Timing{HeartbeatInterval: time.Second}.FailoverMinimum())
	assert.Zero(t, Timing{ElectionTTL: 3 * time.Second}.FailoverMinimum(), "no heartbeat interval: no failover rule")
	// The 2 × interval rule still applies first.
	require.ErrorContains(t, th(time.Second).ValidateTiming(Timing{HeartbeatInterval: time.Second}), "at least 2 × the heartbeat interval")

	// The request timeout is capped at 15s: defaults (TTL 10s, heartbeat
	// 15s) need > 10s + 30s + 15s = 55s, and the default 90s passes.
	def := Timing{HeartbeatInterval: 15 * time.Second, ElectionTTL: 10 * time.Second}
	assert.Equal(t, 55*time.Second, def.FailoverMinimum())
	require.NoError(t, DefaultThresholds().ValidateTiming(def))
	long := Timing{HeartbeatInterval: 30 * time.Second, ElectionTTL: 10 * time.Second}
	assert.Equal(t, 15*time.Second, AgentRequestTimeout(30*time.Second))
	assert.Equal(t, 70*time.Second, long.FailoverMinimum())
	err = th(65 * time.Second).ValidateTiming(long)
	require.ErrorContains(t, err, "2×15s")
	require.ErrorContains(t, err, "= 1m10s")
}

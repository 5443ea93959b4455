package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestThresholdsRefuseReapingAcrossFailover: in Pro
// (ElectionTTL set) both the configured thresholds and a runtime update
// (`vigil thresholds set`, PUT /v1/thresholds) are refused when the
// agent-lost threshold does not exceed election TTL + agent failover bound
// + heartbeat interval; the error states the arithmetic and nothing is
// stored.
func TestThresholdsRefuseReapingAcrossFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.DB(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	th := reaper.DefaultThresholds()
	th.AgentLost = 4 * time.Second
	cfg := Config{Store: st, Metrics: metrics.New(), HeartbeatInterval: time.Second, ElectionTTL: 3 * time.Second, Thresholds: th}
	_, err = New(cfg)
	require.ErrorContains(t, err,
		"AgentLost: 4s must exceed the election TTL 3s + agent failover bound 2×1s + heartbeat interval 1s = 6s")

	cfg.Thresholds.AgentLost = 7 * time.Second
	s, err := New(cfg)
	require.NoError(t, err)
	bad := 6 * time.Second
	err = s.UpdateThresholds(ctx, &bad, nil, nil)
	require.ErrorContains(t, err, "AgentLost: 6s must exceed the election TTL 3s + agent failover bound 2×1s + heartbeat interval 1s = 6s")
	assert.Equal(t, 7*time.Second, s.Thresholds().AgentLost, "nothing applied")
	kv, err := st.Settings(ctx)
	require.NoError(t, err)
	assert.NotContains(t, kv, settingAgentLost, "nothing stored")

	// An override stored by a replica with other timing is ignored here.
	require.NoError(t, st.PutSettings(ctx, map[string]string{settingAgentLost: "5s"}))
	require.NoError(t, s.RefreshThresholds(ctx))
	assert.Equal(t, 7*time.Second, s.Thresholds().AgentLost)

	good := 8 * time.Second
	require.NoError(t, s.UpdateThresholds(ctx, &good, nil, nil))
	assert.Equal(t, 8*time.Second, s.Thresholds().AgentLost)
}

package scheduler

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// One settings pass applies the overrides another replica stored, drops
// those that no longer validate (keeping the configured values), and
// ignores a malformed one alone.
func TestSettingsPassAppliesStoredOverrides(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.DB(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	configured := reaper.Thresholds{AgentLost: time.Minute, DispatchLost: time.Hour, Orphan: time.Hour}
	timing := reaper.Timing{HeartbeatInterval: 5 * time.Second}
	set := newSettings(settingsConfig{Configured: configured, Timing: timing}, st, slog.New(slog.DiscardHandler))
	assert.Equal(t, DefaultSweepInterval, set.cfg.Interval, "the default interval")
	assert.Equal(t, configured, set.get(), "the configured values before any pass")

	require.NoError(t, st.PutSettings(ctx, map[string]string{settingAgentLost: "30s", settingOrphan: "2h"}))
	require.NoError(t, set.runOnce(ctx))
	assert.Equal(t, reaper.Thresholds{AgentLost: 30 * time.Second, DispatchLost: time.Hour, Orphan: 2 * time.Hour}, set.get())

	require.NoError(t, st.PutSettings(ctx, map[string]string{settingDispatchLost: "soon"}))
	require.NoError(t, set.runOnce(ctx))
	assert.Equal(t, reaper.Thresholds{AgentLost: 30 * time.Second, DispatchLost: time.Hour, Orphan: 2 * time.Hour}, set.get(),
		"a malformed override is skipped, the others stay")

	require.NoError(t, st.PutSettings(ctx, map[string]string{settingAgentLost: "6s"}))
	require.NoError(t, set.runOnce(ctx))
	assert.Equal(t, configured, set.get(), "an agent-lost below 2 × heartbeat fails the set: the configured values apply")
}

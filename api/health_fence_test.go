package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/scheduler"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestHealthReportsFenceBlocked: a control plane whose
// elector the fence refuses (here Lite against a fence a Pro cluster
// holds) answers /monitor/health with 503 and leader_fence_blocked, and
// vigil_leader_fence_blocked is 1; after `vigil fence reset` it leads and
// the report is healthy again. Before the fix health stayed 200.
func TestHealthReportsFenceBlocked(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, storetest.DB(t))
	require.NoError(t, err)
	_, err = st.AcquireFenceIn(ctx, store.FenceDomainEtcd, 42, "pro-replica")
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m := metrics.New()
	sched, err := scheduler.New(scheduler.Config{Store: st, Metrics: m, Logger: log, Interval: 50 * time.Millisecond})
	require.NoError(t, err)
	el := leader.NewStatic(st, "lite", log, m)
	srv, err := api.New(api.Config{
		Store: st, Metrics: m, Logger: log, AgentToken: agentToken, OperatorToken: opToken,
		HeartbeatInterval: time.Second, Control: sched, LeaderStatus: el.Status,
	})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = el.Run(ctx, leader.Callbacks{OnStartedLeading: sched.Lead})
	}()
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
		st.Close()
	})

	health := func() (int, api.HealthReport) {
		resp, err := http.Get(hs.URL + "/monitor/health")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		var rep api.HealthReport
		require.NoError(t, json.Unmarshal(body, &rep), string(body))
		return resp.StatusCode, rep
	}
	var code int
	var rep api.HealthReport
	require.Eventually(t, func() bool {
		code, rep = health()
		return rep.LeaderFenceBlocked
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "unhealthy", rep.Status)
	assert.Contains(t, rep.Error, store.FenceRefusedDomain)
	require.NotNil(t, rep.Leader)
	assert.True(t, rep.Leader.FenceBlocked)
	assert.False(t, rep.Leader.Leading)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.LeaderFenceBlocked))

	_, _, err = st.ResetFence(ctx, "test", "this database moved from Pro to Lite")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		code, rep = health()
		return code == http.StatusOK && rep.Leader != nil && rep.Leader.Leading
	}, 15*time.Second, 20*time.Millisecond, "last report: %d %+v", code, rep)
	assert.False(t, rep.LeaderFenceBlocked)
	assert.Equal(t, 0.0, testutil.ToFloat64(m.LeaderFenceBlocked))
}

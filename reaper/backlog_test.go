package reaper_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/state"
)

// backlogEnv is an env whose reapers take pages of batch candidates, with
// a busy linux agent (capacity 1, one TI claimed) and n stale queued TIs
// that agent covers, queued before a TI tagged gpu that no agent offers.
// It returns the env, the gpu run and the time to sweep at (every TI past
// the dispatch-lost threshold, the agent still active).
func backlogEnv(t *testing.T, batch, n int) (*env, int64, time.Time) {
	t.Helper()
	e := newEnv(t)
	e.only(state.ReaperDispatchLost)
	e.reapers = e.reapersWith(batchOf(batch))
	var b strings.Builder
	fmt.Fprintf(&b, "dag_id: backlog\nmax_active_tasks: %d\ntasks:\n", n+1)
	for i := 0; i <= n; i++ {
		fmt.Fprintf(&b, "  - id: t%02d\n    command: [\"true\"]\n    tags: [linux]\n", i)
	}
	e.apply(b.String())
	e.apply("dag_id: gpu\ntasks:\n  - id: g\n    command: [\"true\"]\n    tags: [gpu]\n")
	e.trigger("backlog")
	linux := e.register("linux-box", []string{"linux"}, 1)
	require.Len(t, e.claim(linux, 1), 1, "the only linux agent is now full")
	gpuRun := e.trigger("gpu")
	// Queue order: the whole linux backlog strictly before the gpu TI.
	e.exec(`UPDATE task_instances SET queued_at = now() - interval '20 minutes' + ordinal * interval '1 second'
	         WHERE dag_id = 'backlog' AND state = 'queued'`)
	e.exec(`UPDATE task_instances SET queued_at = now() - interval '10 minutes' WHERE run_id = $1`, gpuRun)
	now := e.dbNow()
	e.exec(`UPDATE agents SET last_heartbeat_at = now() WHERE id = $1`, linux)
	return e, gpuRun, now
}

// A TI no agent can run is failed dispatch_lost even
// when more covered backlog TIs than one page were queued before it.
func TestDispatchLostIsNotStarvedByACoveredBacklog(t *testing.T) {
	t.Parallel()
	e, gpuRun, now := backlogEnv(t, 3, 7) // 7 covered TIs ahead of it, pages of 3
	for sweep := 0; sweep < 2; sweep++ {
		e.sweepAt(now.Add(time.Duration(sweep)*time.Second), e.oldTerm())
	}
	g := e.ti(gpuRun, "g")
	assert.Equal(t, state.TIFailed, g.State, "the uncoverable TI must not wait behind the backlog")
	assert.Equal(t, state.ReasonDispatchLost, g.Reason)
	assert.Contains(t, g.Message, "[gpu]")
	assert.Equal(t, 1.0, e.decisions("dispatch_lost"))
	var queued int
	require.NoError(t, e.raw.QueryRow(e.ctx,
		`SELECT count(*) FROM task_instances WHERE dag_id = 'backlog' AND state = 'queued'`).Scan(&queued))
	assert.Equal(t, 7, queued, "the covered backlog is left alone")
}

// A covered backlog is a gauge, not a decision. Sweep
// after sweep it is measured again, never counted as a decision and never
// written to (no event, no fenced transaction per TI).
func TestDispatchBacklogIsAGaugeNotADecisionPerSweep(t *testing.T) {
	t.Parallel()
	e, gpuRun, now := backlogEnv(t, reaper.DefaultBatch, 4)
	for sweep := 0; sweep < 3; sweep++ {
		rep := e.sweepAt(now.Add(time.Duration(sweep)*time.Second), e.oldTerm())
		for _, c := range rep.Candidates {
			assert.NotEqual(t, "dispatch_lost_deferred", c.Decision, "sweep %d lists only what it reaps", sweep)
		}
		assert.Equal(t, 4.0, testutil.ToFloat64(e.metrics.DispatchBacklog.WithLabelValues("")), "sweep %d", sweep)
		assert.InDelta(t, (20*time.Minute - time.Duration(sweep)*time.Second).Seconds(),
			testutil.ToFloat64(e.metrics.DispatchBacklogOldest.WithLabelValues("")), 5, "sweep %d: the oldest backlog TI's age", sweep)
	}
	assert.Zero(t, e.decisions("dispatch_lost_deferred"), "a backlog is not a decision")
	assert.Equal(t, 1.0, e.decisions("dispatch_lost"), "the uncoverable TI is reaped once")
	assert.Equal(t, state.TIFailed, e.ti(gpuRun, "g").State)
	var events int
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT count(*) FROM events WHERE kind = 'dispatch_lost_deferred'`).Scan(&events))
	assert.Zero(t, events)

	// A dry run still shows the operator what is left alone, and why.
	e.clock.Set(now)
	rep, err := e.reapers.DryRun(e.ctx, e.oldTerm())
	require.NoError(t, err)
	deferred := 0
	for _, c := range rep.Candidates {
		if c.Decision == "dispatch_lost_deferred" {
			deferred++
			assert.Contains(t, c.Message, "a backlog, left alone")
		}
	}
	assert.Equal(t, 4, deferred)
	assert.Zero(t, e.decisions("dispatch_lost_deferred"))
}

// A TI waiting only for a slot of its task pool (the pool full, its agent
// with room to spare) is a backlog, never dispatch_lost: it is left
// queued past the threshold and counted in the backlog gauges under its
// pool (docs/pools.md).
func TestPoolWaitIsABacklogNotDispatchLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperDispatchLost)
	_, err := e.store.SetTaskPool(e.ctx, "db", 1, nil)
	require.NoError(t, err)
	e.apply("dag_id: pooled\ntasks:\n  - id: a\n    command: [\"true\"]\n    pool: db\n  - id: b\n    command: [\"true\"]\n    pool: db\n")
	run := e.trigger("pooled")
	box := e.register("box", nil, 10)
	require.Len(t, e.claim(box, 10), 1, "the pool's one slot; the agent keeps 9 free")
	e.exec(`UPDATE task_instances SET queued_at = now() - interval '20 minutes' WHERE run_id = $1 AND state = 'queued'`, run)
	now := e.dbNow()
	e.exec(`UPDATE agents SET last_heartbeat_at = now() WHERE id = $1`, box)
	for sweep := 0; sweep < 2; sweep++ {
		e.sweepAt(now.Add(time.Duration(sweep)*time.Second), e.oldTerm())
	}
	assert.Zero(t, e.decisions("dispatch_lost"), "waiting for a pool slot is not dispatch_lost")
	var queued int
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT count(*) FROM task_instances WHERE run_id = $1 AND state = 'queued'`, run).Scan(&queued))
	assert.Equal(t, 1, queued)
	assert.Equal(t, 1.0, testutil.ToFloat64(e.metrics.DispatchBacklog.WithLabelValues("db")), "counted under its pool")
	assert.Zero(t, testutil.ToFloat64(e.metrics.DispatchBacklog.WithLabelValues("")), "none without a pool")
	assert.InDelta(t, (20 * time.Minute).Seconds(), testutil.ToFloat64(e.metrics.DispatchBacklogOldest.WithLabelValues("db")), 5)
}

package reaper_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

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
	e.only(reaper.ReaperDispatchLost)
	var err error
	e.reapers, err = reaper.New(reaper.Config{
		Store: e.store, Metrics: e.metrics, Clock: e.clock, Thresholds: func() reaper.Thresholds { return e.th },
		Logger: slog.New(slog.DiscardHandler), Batch: batch,
	})
	require.NoError(t, err)
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

// Item 2 of issue 10: a TI no agent can run is failed dispatch_lost even
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

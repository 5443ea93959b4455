package reaper_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/internal/testlog"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/state"
)

// A dispatch-lost reap re-checks, as it writes, that no agent active
// within the agent-lost threshold (before the pass's now) covers the TI:
// an agent that comes back between the listing and the write keeps its
// work. The interleaving is made with the fence row: the test holds it
// FOR UPDATE, so the pass lists the TI and then waits in its leader
// transaction's fence check; the agent heartbeats; the test lets go.
func TestDispatchLostSparesATaskWhoseAgentReturnsBeforeTheWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperDispatchLost)
	e.apply("dag_id: tagged\ntasks:\n  - id: x\n    command: [\"true\"]\n    tags: [special]\n")
	runID := e.trigger("tagged")
	agent := e.register("special-box", []string{"special"}, 1)
	e.exec(`UPDATE task_instances SET queued_at = now() - interval '10 minutes' WHERE run_id = $1`, runID)
	e.exec(`UPDATE agents SET last_heartbeat_at = now() - interval '1 hour' WHERE id = $1`, agent)
	e.clock.Set(e.dbNow())

	hold, err := e.raw.Begin(e.ctx)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback(context.Background()) }()
	_, err = hold.Exec(e.ctx, `SELECT 1 FROM leader_fence FOR UPDATE`)
	require.NoError(t, err)

	type result struct {
		rep reaper.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := e.reapers.Pass(e.ctx, state.ReaperDispatchLost, e.oldTerm())
		done <- result{rep, err}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&waiting))
		if waiting > 0 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the pass ended without waiting for the fence: err %v, candidates %+v", r.err, r.rep.Candidates)
		default:
		}
		require.True(t, time.Now().Before(deadline), "the pass did not reach its fence check within 30s")
		time.Sleep(5 * time.Millisecond)
	}
	e.exec(`UPDATE agents SET last_heartbeat_at = now() WHERE id = $1`, agent)
	require.NoError(t, hold.Rollback(e.ctx))

	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the pass did not end within 30s of the fence's release")
	}
	require.NoError(t, r.err)
	require.Len(t, r.rep.Candidates, 1, "listed while the agent looked gone")
	assert.False(t, r.rep.Candidates[0].Applied, "not written: the agent came back")
	assert.Equal(t, state.TIQueued, e.ti(runID, "x").State)
	assert.Zero(t, e.decisions("dispatch_lost"))
}

// A TI whose tags are each offered by some active agent, but by no single
// one, is dispatch-lost, and the message says so rather than naming
// missing tags.
func TestDispatchLostNamesTagsSplitAcrossAgents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperDispatchLost)
	e.apply("dag_id: split\ntasks:\n  - id: x\n    command: [\"true\"]\n    tags: [gpu, linux]\n")
	runID := e.trigger("split")
	e.register("gpu-box", []string{"gpu"}, 1)
	e.register("linux-box", []string{"linux"}, 1)
	e.exec(`UPDATE task_instances SET queued_at = now() - interval '10 minutes' WHERE run_id = $1`, runID)

	rep := e.sweepAt(e.dbNow(), e.oldTerm())
	require.Len(t, rep.Candidates, 1)
	assert.True(t, rep.Candidates[0].Applied)
	assert.Contains(t, rep.Candidates[0].Message, "and no single active agent offers all of the required tags [gpu linux]")
	assert.Equal(t, state.TIFailed, e.ti(runID, "x").State)
}

// Every applied decision is logged on the configured logger.
func TestDecisionsAreLoggedOnTheConfiguredLogger(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs := &testlog.Buffer{}
	e.reapers = e.reapersWith(func(c *reaper.Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	e.only(state.ReaperDispatchLost)
	e.apply("dag_id: tagged\ntasks:\n  - id: x\n    command: [\"true\"]\n    tags: [special]\n")
	runID := e.trigger("tagged")
	e.exec(`UPDATE task_instances SET queued_at = now() - interval '10 minutes' WHERE run_id = $1`, runID)

	rep := e.sweepAt(e.dbNow(), e.oldTerm())
	require.Len(t, rep.Candidates, 1)
	require.True(t, rep.Candidates[0].Applied)
	assert.Contains(t, logs.String(), "decision=dispatch_lost")
}

// A dry run lists at most one batch of dispatch-lost candidates: the
// backlog it shows fills only what the real candidates leave.
func TestDryRunBacklogFillsOnlyTheRestOfTheBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.reapers = e.reapersWith(batchOf(2))
	e.only(state.ReaperDispatchLost)
	e.apply("dag_id: mixed\nmax_active_tasks: 10\ntasks:\n  - id: gpu\n    command: [\"true\"]\n    tags: [gpu]\n" +
		"  - id: a\n    command: [\"true\"]\n  - id: b\n    command: [\"true\"]\n")
	runID := e.trigger("mixed")
	busy := e.register("busy", nil, 1) // covers a and b; nothing is claimed
	e.exec(`UPDATE task_instances SET queued_at = now() - interval '10 minutes' WHERE run_id = $1`, runID)
	e.exec(`UPDATE agents SET last_heartbeat_at = now() WHERE id = $1`, busy)
	e.clock.Set(e.dbNow())

	rep, err := e.reapers.DryRun(e.ctx, e.oldTerm())
	require.NoError(t, err)
	var lost, deferred int
	for _, c := range rep.Candidates {
		switch c.Decision {
		case "dispatch_lost":
			lost++
		case "dispatch_lost_deferred":
			deferred++
		}
	}
	assert.Equal(t, 1, lost, "gpu: no agent offers it")
	assert.Equal(t, 1, deferred, "one of a and b fills the batch of 2")
}

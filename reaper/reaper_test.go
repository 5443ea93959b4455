package reaper_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

const twoTasks = `dag_id: two
tasks:
  - id: a
    command: ["true"]
    retries: 1
    retry_delay: 5s
  - id: b
    command: ["true"]
`

func TestAgentLostFailsStartedTasksAndRespectsRetryBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply(twoTasks)
	runID := e.trigger("two")
	agent := e.register("w", nil, 4)
	tasks := e.claim(agent, 2)
	require.Len(t, tasks, 2)
	e.started(agent, tasks...)

	// Not yet stale: left alone.
	rep := e.sweepAt(e.dbNow().Add(80*time.Second), e.oldTerm())
	assert.Empty(t, rep.Candidates)

	rep = e.sweepAt(e.dbNow().Add(100*time.Second), e.oldTerm())
	require.Len(t, rep.Candidates, 2)
	a, b := e.ti(runID, "a"), e.ti(runID, "b")
	assert.Equal(t, state.TIUpForRetry, a.State, "retry budget remains")
	assert.Equal(t, state.ReasonAgentLost, a.Reason)
	assert.NotNil(t, a.NextRetryAt)
	assert.Equal(t, 1, a.TryNumber, "the try was spent")
	assert.Equal(t, state.TIFailed, b.State, "no retries left")
	assert.Equal(t, state.ReasonAgentLost, b.Reason)
	assert.Contains(t, b.Message, "silent for")
	assert.Equal(t, 2.0, e.decisions("agent_lost"))
	assert.Contains(t, e.eventKinds(runID), "agent_lost")

	// The agent's next heartbeat is told to stop both reaped attempts.
	stops, _, err := e.store.Heartbeat(e.ctx, agent, []store.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}})
	require.NoError(t, err)
	require.Len(t, stops, 1)
	assert.Equal(t, state.StopReaped, stops[0].Reason)
}

func TestAgentLostLeavesUnobservedTasksAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	e.apply(twoTasks)
	runID := e.trigger("two")
	// A running TI that never heartbeated and has no claim (e.g. written by
	// an older version or by hand): no positive signal, never reaped.
	e.exec(`UPDATE task_instances SET state = 'running', last_heartbeat_at = NULL, attempt_id = NULL WHERE run_id = $1 AND task_id = 'a'`, runID)
	rep := e.sweepAt(e.dbNow().Add(12*time.Hour), e.oldTerm())
	for _, c := range rep.Candidates {
		assert.NotEqual(t, "agent_lost", c.Reaper, "%+v", c)
	}
	assert.Equal(t, state.TIRunning, e.ti(runID, "a").State)
	assert.Equal(t, state.TIQueued, e.ti(runID, "b").State, "the queued TI is not the agent-lost reaper's business")
}

func TestNeverStartedIsRequeuedThenHitsTheAttemptCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	e.apply("dag_id: one\ntasks:\n  - id: a\n    command: [\"true\"]\n    retries: 3\n")
	runID := e.trigger("one")
	agent := e.register("w", nil, 1)
	now := e.dbNow()
	for attempt := 1; attempt <= reaper.MaxDispatchAttempts; attempt++ {
		e.schedule()
		tasks := e.claim(agent, 1)
		require.Len(t, tasks, 1, "attempt %d", attempt)
		assert.Equal(t, 1, tasks[0].TryNumber, "a never-started requeue spends no try")
		now = now.Add(100 * time.Second)
		rep := e.sweepAt(now, reaper.Term{Epoch: epoch, GraceStart: now.Add(-time.Hour)})
		require.Len(t, rep.Candidates, 1)
		ti := e.ti(runID, "a")
		if attempt < reaper.MaxDispatchAttempts {
			assert.Equal(t, "agent_lost_requeued", rep.Candidates[0].Decision)
			assert.Equal(t, state.TIScheduled, ti.State)
			assert.Equal(t, 0, ti.TryNumber)
			assert.Equal(t, attempt, ti.DispatchAttempts)
			assert.Nil(t, ti.QueuedAt, "queued_at is re-stamped when it is queued again")
		} else {
			assert.Equal(t, "dispatch_lost", rep.Candidates[0].Decision)
			assert.Equal(t, state.TIFailed, ti.State)
			assert.Equal(t, state.ReasonDispatchLost, ti.Reason)
			assert.Contains(t, ti.Message, "dispatched 5 times")
		}
	}
	assert.Equal(t, 4.0, e.decisions("agent_lost_requeued"))
	assert.Equal(t, 1.0, e.decisions("dispatch_lost"))
}

// A control-plane outage must not fail healthy tasks: staleness accrued
// before the leader led (with the database reachable) does not count.
func TestPostLeadershipGraceHolds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	e.apply(twoTasks)
	runID := e.trigger("two")
	agent := e.register("w", nil, 4)
	tasks := e.claim(agent, 2)
	e.started(agent, tasks...)
	// The agents have been silent for 10 minutes, but this leader only
	// started leading 30 s ago (a restart, a failover, a database outage).
	e.ageHeartbeat("run_id = $1 AND state = 'running'", 10*time.Minute, runID)
	now := e.dbNow()
	term := reaper.Term{Epoch: epoch, GraceStart: now.Add(-30 * time.Second)}

	rep := e.sweepAt(now, term)
	assert.Empty(t, rep.Candidates)
	assert.Contains(t, rep.GraceText(), "grace")
	assert.Equal(t, state.TIRunning, e.ti(runID, "a").State)

	// The agent reconnects within the grace: nothing is ever reaped, even
	// once the leader has led for longer than the threshold.
	e.started(agent, tasks...)
	rep = e.sweepAt(now.Add(70*time.Second), term)
	assert.Empty(t, rep.Candidates)
	assert.Empty(t, rep.Grace, "led for 100 s: the grace is over")
	assert.Equal(t, state.TIRunning, e.ti(runID, "a").State)

	// An agent that stays silent past the threshold after the grace is reaped.
	rep = e.sweepAt(now.Add(200*time.Second), term)
	assert.Len(t, rep.Candidates, 2)
	assert.Equal(t, state.TIUpForRetry, e.ti(runID, "a").State)
}

func TestDispatchLostFailsUnmatchableAndDefersBacklog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply(`dag_id: tags
max_active_tasks: 10
tasks:
  - id: gpu
    command: ["true"]
    tags: [gpu, linux]
    retries: 3
  - id: plain
    command: ["true"]
  - id: busy
    command: ["true"]
    tags: [linux]
`)
	runID := e.trigger("tags")
	// A linux agent is live but full: "busy" and "plain" are a backlog.
	linux := e.register("linux-box", []string{"linux"}, 1)
	blocker := e.claim(linux, 1)
	require.Len(t, blocker, 1)
	now := e.dbNow().Add(4 * time.Minute)
	e.exec(`UPDATE agents SET last_heartbeat_at = now() + interval '4 minutes' WHERE id = $1`, linux)

	rep := e.sweepAt(now, e.oldTerm())
	byTask := map[string]reaper.Candidate{}
	for _, c := range rep.Candidates {
		byTask[c.TaskID] = c
	}
	require.Contains(t, byTask, "gpu")
	assert.Equal(t, "dispatch_lost", byTask["gpu"].Decision)
	gpu := e.ti(runID, "gpu")
	assert.Equal(t, state.TIFailed, gpu.State)
	assert.Equal(t, state.ReasonDispatchLost, gpu.Reason)
	assert.Contains(t, gpu.Message, "[gpu]", "the message names the missing tag")
	assert.Equal(t, 0, gpu.TryNumber, "no retry: nothing could run it")

	for _, c := range rep.Candidates {
		assert.NotEqual(t, "dispatch_lost_deferred", c.Decision, "a sweep lists only what it reaps")
	}
	assert.Equal(t, state.TIQueued, e.ti(runID, "busy").State, "the TI the busy agent could run later is left alone")
	assert.Equal(t, 1.0, testutil.ToFloat64(e.metrics.DispatchBacklog.WithLabelValues("")), "and measured as the backlog")
}

func TestDispatchLostNeedsQueuedAtAndAge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply(twoTasks)
	runID := e.trigger("two")
	e.exec(`UPDATE task_instances SET queued_at = NULL WHERE run_id = $1 AND task_id = 'a'`, runID)
	rep := e.sweepAt(e.dbNow().Add(2*time.Minute), e.oldTerm())
	assert.Empty(t, rep.Candidates, "younger than the threshold")
	rep = e.sweepAt(e.dbNow().Add(time.Hour), e.oldTerm())
	require.Len(t, rep.Candidates, 1, "only b: a has no queued_at, too poorly observed to reap")
	assert.Equal(t, "b", rep.Candidates[0].TaskID)
	assert.Contains(t, rep.Candidates[0].Message, "no agent is active")
	assert.Equal(t, state.TIQueued, e.ti(runID, "a").State)
}

func TestOrphanRunReaper(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperOrphan)
	e.apply("dag_id: chain\ntasks:\n  - id: a\n    command: [\"true\"]\n  - id: b\n    command: [\"true\"]\n    depends_on: [a]\n")
	done, stuck, active := e.trigger("chain"), e.trigger("chain"), e.trigger("chain")
	// Finalizable: every TI terminal but the run left running (a crash
	// between the last completion and finalization).
	e.exec(`UPDATE task_instances SET state = 'success' WHERE run_id = $1`, done)
	// Stuck: a succeeded, b left 'none' and nothing will ever move it.
	e.exec(`UPDATE task_instances SET state = CASE task_id WHEN 'a' THEN 'success' ELSE 'none' END WHERE run_id = $1`, stuck)
	e.idle(done, stuck)
	// Active: a still queued. Never an orphan.

	rep := e.sweepAt(e.dbNow().Add(4*time.Minute), e.oldTerm())
	assert.Empty(t, rep.Candidates, "nothing is older than the 5 min threshold")

	rep = e.sweepAt(e.dbNow().Add(6*time.Minute), e.oldTerm())
	got := map[int64]string{}
	for _, c := range rep.Candidates {
		got[c.RunID] = c.Decision
	}
	assert.Equal(t, map[int64]string{done: "orphan_finalized", stuck: "orphan_reaped"}, got)
	assert.Equal(t, state.RunSuccess, e.run(done).State)
	s := e.run(stuck)
	assert.Equal(t, state.RunFailed, s.State)
	assert.Equal(t, state.ReasonOrphaned, s.Reason)
	assert.Equal(t, state.TIFailed, e.ti(stuck, "b").State)
	assert.Equal(t, state.ReasonOrphaned, e.ti(stuck, "b").Reason)
	assert.Equal(t, state.RunRunning, e.run(active).State)
	assert.Equal(t, state.TIQueued, e.ti(active, "a").State)
	assert.Contains(t, e.eventKinds(stuck), "orphan_reaped")
	assert.Equal(t, 1.0, e.decisions("orphan_reaped"))
	assert.Equal(t, 1.0, e.decisions("orphan_finalized"))
}

// The orphan SLA for a run a write outside Vigil left running with
// nothing active (an operator's UPDATE in psql): no scheduler pass, no
// reconcile and no mark by the test, only the write. The orphan clock
// starts at the write (the database marks the run in the same
// transaction, migration 017), so the first sweep at or after write +
// threshold finalizes the run: within threshold + one sweep interval. The
// sweeps are driven on the database clock.
func TestOrphanSLAForAnOutOfBandLimboRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperOrphan)
	e.apply("dag_id: chain\ntasks:\n  - id: a\n    command: [\"true\"]\n  - id: b\n    command: [\"true\"]\n    depends_on: [a]\n")
	done, stuck, active := e.trigger("chain"), e.trigger("chain"), e.trigger("chain")
	e.exec(`UPDATE task_instances SET state = 'success' WHERE run_id = $1`, done)
	e.exec(`UPDATE task_instances SET state = CASE task_id WHEN 'a' THEN 'success' ELSE 'none' END WHERE run_id = $1`, stuck)
	written := e.dbNow()
	threshold := reaper.DefaultThresholds().Orphan

	rep := e.sweepAt(written.Add(threshold-time.Second), e.oldTerm())
	assert.Empty(t, rep.Candidates, "a second short of the threshold")

	rep = e.sweepAt(written.Add(threshold), e.oldTerm())
	got := map[int64]string{}
	for _, c := range rep.Candidates {
		got[c.RunID] = c.Decision
	}
	assert.Equal(t, map[int64]string{done: "orphan_finalized", stuck: "orphan_reaped"}, got,
		"the first sweep at write + threshold finalizes both")
	assert.Equal(t, state.RunSuccess, e.run(done).State)
	assert.Equal(t, state.RunFailed, e.run(stuck).State)
	assert.Equal(t, state.ReasonOrphaned, e.run(stuck).Reason)
	assert.Equal(t, state.RunRunning, e.run(active).State, "a run with an active TI is never marked")

	// The scheduler is told too: both runs were appended to run_dirty by
	// the write, so a tick looks at them at once.
	var dirty int
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT count(DISTINCT run_id) FROM run_dirty WHERE run_id = ANY ($1)`,
		[]int64{done, stuck, active}).Scan(&dirty))
	assert.Equal(t, 2, dirty)
}

// Dry run lists exactly the candidates with their signals and writes
// nothing.
func TestDryRunListsExactlyTheCandidates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply(twoTasks)
	e.apply("dag_id: gpu\ntasks:\n  - id: g\n    command: [\"true\"]\n    tags: [gpu]\n")
	silent := e.trigger("two")
	agent := e.register("w", nil, 1)
	tasks := e.claim(agent, 1) // a: claimed and started, then silent
	e.started(agent, tasks...)
	unmatched := e.trigger("gpu")
	orphan := e.trigger("two")
	e.exec(`UPDATE task_instances SET state = 'success' WHERE run_id = $1`, orphan)
	e.idle(orphan)
	e.exec(`UPDATE agents SET last_heartbeat_at = now() + interval '9 minutes' WHERE id = $1`, agent)

	rep, err := e.reapers.DryRun(e.ctx, e.oldTerm())
	require.NoError(t, err)
	assert.Empty(t, rep.Candidates, "nothing is stale yet")

	e.clock.Set(e.dbNow().Add(10 * time.Minute))
	rep, err = e.reapers.DryRun(e.ctx, e.oldTerm())
	require.NoError(t, err)
	require.True(t, rep.DryRun)
	type key struct {
		reaper, decision, task string
		run                    int64
	}
	var got []key
	for _, c := range rep.Candidates {
		got = append(got, key{string(c.Reaper), c.Decision, c.TaskID, c.RunID})
		assert.NotEmpty(t, c.Signal)
		assert.Greater(t, c.Age, 3*time.Minute)
		assert.False(t, c.Applied)
	}
	assert.ElementsMatch(t, []key{
		{"agent_lost", "agent_lost", "a", silent},
		{"dispatch_lost", "dispatch_lost_deferred", "b", silent},
		{"dispatch_lost", "dispatch_lost", "g", unmatched},
		{"orphan", "orphan_finalized", "", orphan},
	}, got)
	assert.Equal(t, state.TIRunning, e.ti(silent, "a").State, "a dry run writes nothing")
	assert.Equal(t, state.TIQueued, e.ti(unmatched, "g").State)
	assert.Equal(t, state.RunRunning, e.run(orphan).State)
	assert.Zero(t, e.decisions("agent_lost"))
}

func TestLateSuccessAfterAgentLostIsAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply(twoTasks)
	runID := e.trigger("two")
	agent := e.register("w", nil, 4)
	tasks := e.claim(agent, 2)
	e.started(agent, tasks...)
	e.sweepAt(e.dbNow().Add(100*time.Second), e.oldTerm())
	var a, b store.ClaimedTask
	for _, task := range tasks {
		if task.TaskID == "a" {
			a = task
		} else {
			b = task
		}
	}
	require.Equal(t, state.TIUpForRetry, e.ti(runID, "a").State)
	require.Equal(t, state.TIFailed, e.ti(runID, "b").State)

	// The partitioned agent finished both; its buffered successes arrive.
	for _, task := range []store.ClaimedTask{a, b} {
		got, late, err := e.store.Complete(e.ctx, agent, store.Completion{Attempt: task.Attempt, Outcome: state.OutcomeSuccess})
		require.NoError(t, err, task.TaskID)
		assert.Equal(t, state.TISuccess, got)
		assert.True(t, late)
	}
	assert.Equal(t, state.TISuccess, e.ti(runID, "a").State)
	assert.Equal(t, state.TISuccess, e.ti(runID, "b").State)
	assert.Contains(t, e.eventKinds(runID), "late_completion_accepted")

	// Once a newer attempt is claimed, the old one's success changes
	// nothing: it is recorded only (TestLateSuccessAfterTheRetryWasClaimedIsRecorded).
	e.apply("dag_id: again\ntasks:\n  - id: x\n    command: [\"true\"]\n    retries: 1\n")
	run2 := e.trigger("again")
	first := e.claim(agent, 1)
	e.started(agent, first...)
	e.sweepAt(e.dbNow().Add(200*time.Second), e.oldTerm())
	e.exec(`UPDATE task_instances SET next_retry_at = now() WHERE run_id = $1`, run2)
	e.schedule()
	second := e.claim(agent, 1)
	require.Len(t, second, 1)
	got, late, err := e.store.Complete(e.ctx, agent, store.Completion{Attempt: first[0].Attempt, Outcome: state.OutcomeSuccess})
	require.NoError(t, err)
	assert.True(t, late)
	assert.Equal(t, state.TIRunning, got)
	assert.Equal(t, second[0].AttemptID, e.ti(run2, "x").AttemptID, "the newer attempt stays current")
}

// After an outage agents have not heartbeated for a while; dispatch-lost
// must not conclude that none is alive before they could reconnect.
func TestDispatchLostWaitsOutThePostLeadershipGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperDispatchLost)
	e.apply("dag_id: one\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	runID := e.trigger("one")
	e.register("w", nil, 1)
	e.exec(`UPDATE task_instances SET queued_at = now() - interval '10 minutes' WHERE run_id = $1`, runID)
	e.exec(`UPDATE agents SET last_heartbeat_at = now() - interval '10 minutes'`)
	now := e.dbNow()
	rep := e.sweepAt(now, reaper.Term{Epoch: epoch, GraceStart: now.Add(-10 * time.Second)})
	assert.Empty(t, rep.Candidates)
	assert.Contains(t, rep.GraceText(), "dispatch-lost reaper in post-leadership grace")
	assert.Equal(t, state.TIQueued, e.ti(runID, "a").State)

	rep = e.sweepAt(now, e.oldTerm())
	require.Len(t, rep.Candidates, 1)
	assert.Equal(t, "dispatch_lost", rep.Candidates[0].Decision)
}

// A success for the attempt that dispatch-lost gave up on (the "started"
// report was lost, then the requeued TI found no agent) is accepted.
func TestLateSuccessAfterDispatchLostIsAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply("dag_id: one\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	runID := e.trigger("one")
	agent := e.register("w", nil, 1)
	tasks := e.claim(agent, 1) // claimed, never reported started
	e.sweepAt(e.dbNow().Add(100*time.Second), e.oldTerm())
	require.Equal(t, state.TIScheduled, e.ti(runID, "a").State)
	e.schedule()
	e.exec(`UPDATE task_instances SET queued_at = now() - interval '10 minutes' WHERE run_id = $1`, runID)
	e.exec(`UPDATE agents SET last_heartbeat_at = now() - interval '1 hour'`)
	e.sweepNow()
	require.Equal(t, state.ReasonDispatchLost, e.ti(runID, "a").Reason)

	got, late, err := e.store.Complete(e.ctx, agent, store.Completion{Attempt: tasks[0].Attempt, Outcome: state.OutcomeSuccess})
	require.NoError(t, err)
	assert.True(t, late)
	assert.Equal(t, state.TISuccess, got)
}

// Accepting a late success from 'failed' re-opens the dependents that
// were marked upstream_failed because of it, so the run completes
// honestly instead of failing with every upstream succeeded.
func TestLateSuccessReopensUpstreamFailedDependents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	// c keeps the run alive (queued) while a is reaped and b fails upstream.
	e.apply("dag_id: chain\ntasks:\n  - id: a\n    command: [\"true\"]\n  - id: b\n    command: [\"true\"]\n    depends_on: [a]\n  - id: c\n    command: [\"true\"]\n")
	runID := e.trigger("chain")
	agent := e.register("w", nil, 1)
	tasks := e.claim(agent, 1)
	require.Equal(t, "a", tasks[0].TaskID)
	e.started(agent, tasks...)
	e.sweepAt(e.dbNow().Add(100*time.Second), e.oldTerm())
	require.Equal(t, state.TIFailed, e.ti(runID, "a").State)
	e.schedule()
	require.Equal(t, state.TIUpstreamFailed, e.ti(runID, "b").State)

	_, late, err := e.store.Complete(e.ctx, agent, store.Completion{Attempt: tasks[0].Attempt, Outcome: state.OutcomeSuccess})
	require.NoError(t, err)
	require.True(t, late)
	assert.Equal(t, state.TINone, e.ti(runID, "b").State)
	e.schedule()
	assert.Equal(t, state.TIQueued, e.ti(runID, "b").State, "b now runs: its only upstream succeeded")
	e.schedule()
	assert.Equal(t, state.RunRunning, e.run(runID).State)
}

package reaper_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/state"
)

// AtRisk, on a stepped clock: a heartbeat two intervals old is not at
// risk; one overdue by more than an interval is, with the time left
// before agent_lost, and a sweep at that moment reaps nothing; once the
// threshold passes, the sweep reaps exactly the task instances AtRisk
// listed, with the decision it named.
func TestAtRiskListsWhatTheSweepLaterReaps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	e.apply(twoTasks)
	runID := e.trigger("two")
	agent := e.register("host-3", nil, 4)
	tasks := e.claim(agent, 2)
	require.Len(t, tasks, 2)
	e.started(agent, tasks...)
	const hb = 15 * time.Second
	base := e.dbNow()
	term := e.oldTerm()

	e.clock.Set(base.Add(2*hb - time.Second))
	risk, err := e.reapers.AtRisk(e.ctx, &term, hb)
	require.NoError(t, err)
	assert.Empty(t, risk.Running, "overdue by less than one interval")

	e.clock.Set(base.Add(40 * time.Second))
	risk, err = e.reapers.AtRisk(e.ctx, &term, hb)
	require.NoError(t, err)
	require.Len(t, risk.Running, 2)
	var listed []int64
	for _, r := range risk.Running {
		listed = append(listed, r.TIID)
		assert.Equal(t, runID, r.RunID)
		assert.InDelta(t, (e.th.AgentLost - 40*time.Second).Seconds(), r.TimeLeft.Seconds(), 1)
		assert.InDelta(t, (40*time.Second - hb).Seconds(), r.Overdue.Seconds(), 1)
		assert.Equal(t, state.EventAgentLost, r.Decision)
		assert.Contains(t, r.Outcome, "silent for 40s")
	}
	assert.Empty(t, risk.Grace, "an old term holds nothing back")
	assert.Empty(t, e.sweepAt(base.Add(40*time.Second), term).Candidates, "at risk is not reaped yet")

	e.clock.Set(base.Add(e.th.AgentLost + time.Second))
	risk, err = e.reapers.AtRisk(e.ctx, &term, hb)
	require.NoError(t, err)
	require.Len(t, risk.Running, 2)
	assert.Zero(t, risk.Running[0].TimeLeft, "past the threshold: the next sweep acts")
	rep := e.sweepAt(base.Add(e.th.AgentLost+time.Second), term)
	var reaped []int64
	for _, c := range rep.Candidates {
		require.True(t, c.Applied)
		assert.Equal(t, metrics.DecisionAgentLost, c.Decision)
		reaped = append(reaped, *c.TIID)
	}
	slices.Sort(listed)
	slices.Sort(reaped)
	assert.Equal(t, listed, reaped, "the sweep reaped what AtRisk listed")
}

// A follower does not know the leader's grace, and says so.
func TestAtRiskOnAFollowerSaysTheGraceIsUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.clock.Set(e.dbNow())
	risk, err := e.reapers.AtRisk(e.ctx, nil, 15*time.Second)
	require.NoError(t, err)
	require.Len(t, risk.Grace, 1)
	assert.Contains(t, risk.Grace[0].Message, "does not lead")
	assert.Equal(t, []reaper.AtRiskRunning{}, risk.Running)
}

// LastSweeps keeps each reaper's last real pass, in Names order, at the
// sweep's clock; a dry run is not a sweep.
func TestLastSweepsRecordsRealPassesOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	assert.Empty(t, e.reapers.LastSweeps())
	at := e.dbNow().Add(time.Minute)
	e.sweepAt(at, e.oldTerm())
	sweeps := e.reapers.LastSweeps()
	require.Len(t, sweeps, len(state.Reapers()))
	for i, sw := range sweeps {
		assert.Equal(t, state.Reapers()[i], sw.Reaper)
		assert.True(t, sw.At.Equal(at), "%s swept at the reaper clock", sw.Reaper)
		assert.Positive(t, sw.Duration)
	}
	e.clock.Set(at.Add(time.Hour))
	_, err := e.reapers.DryRun(e.ctx, e.oldTerm())
	require.NoError(t, err)
	assert.True(t, e.reapers.LastSweeps()[0].At.Equal(at), "a dry run is not recorded")
}

// RunAtRisk reads every running TI of its run and lists only those silent
// for more than two heartbeat intervals: at exactly two, not yet; a
// microsecond (the database's resolution) later, it is.
func TestRunAtRiskListsSilenceOfMoreThanTwoIntervals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply(twoTasks)
	runID := e.trigger("two")
	agent := e.register("host-3", nil, 4)
	tasks := e.claim(agent, 1)
	require.Len(t, tasks, 1)
	e.started(agent, tasks...)
	var beat time.Time
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT last_heartbeat_at FROM task_instances WHERE id = $1`, tasks[0].TIID).Scan(&beat))
	const hb = 15 * time.Second
	term := e.oldTerm()

	e.clock.Set(beat.Add(2 * hb))
	risk, err := e.reapers.RunAtRisk(e.ctx, &term, hb, runID)
	require.NoError(t, err)
	assert.Empty(t, risk.Running, "silent for exactly two intervals")

	e.clock.Set(beat.Add(2*hb + time.Microsecond))
	risk, err = e.reapers.RunAtRisk(e.ctx, &term, hb, runID)
	require.NoError(t, err)
	require.Len(t, risk.Running, 1, "silent for more than two intervals")
	assert.Equal(t, tasks[0].TIID, risk.Running[0].TIID)
	assert.Equal(t, hb+time.Microsecond, risk.Running[0].Overdue)
}

// AtRisk lists the runs nearing their timeout (see nearing), with the
// time left; RunAtRisk lists only its own run.
func TestAtRiskListsRunsNearingTheirTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply("dag_id: bounded\ntimeout: 10m\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	first := e.trigger("bounded")
	second := e.trigger("bounded")
	deadline := func(runID int64) time.Time {
		var d time.Time
		require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT deadline_at FROM runs WHERE id = $1`, runID).Scan(&d))
		return d
	}
	due := deadline(first)
	require.False(t, deadline(second).Before(due))
	term := e.oldTerm()

	e.clock.Set(due.Add(-3 * time.Minute))
	risk, err := e.reapers.AtRisk(e.ctx, &term, 15*time.Second)
	require.NoError(t, err)
	assert.NotContains(t, runIDs(risk.Runs), first, "3m left of a 10m timeout is not nearing it")

	e.clock.Set(due.Add(-2 * time.Minute))
	risk, err = e.reapers.AtRisk(e.ctx, &term, 15*time.Second)
	require.NoError(t, err)
	require.Contains(t, runIDs(risk.Runs), first)
	assert.Equal(t, 2*time.Minute, risk.Runs[0].TimeLeft)
	assert.Equal(t, 10*time.Minute, risk.Runs[0].Timeout)

	e.clock.Set(deadline(second).Add(-time.Minute))
	risk, err = e.reapers.RunAtRisk(e.ctx, &term, 15*time.Second, second)
	require.NoError(t, err)
	assert.Equal(t, []int64{second}, runIDs(risk.Runs), "only its own run")
	risk, err = e.reapers.RunAtRisk(e.ctx, &term, 15*time.Second, first)
	require.NoError(t, err)
	assert.Equal(t, []int64{first}, runIDs(risk.Runs), "only its own run")
}

func runIDs(runs []reaper.AtRiskRun) []int64 {
	ids := []int64{}
	for _, r := range runs {
		ids = append(ids, r.RunID)
	}
	return ids
}

// AtRisk lists a queued TI that no active agent can take, with its
// required and missing tags and the time left before dispatch_lost.
func TestAtRiskListsQueuedWorkNoAgentCanTake(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply("dag_id: tags\ntasks:\n  - id: gpu\n    command: [\"true\"]\n    tags: [gpu, linux]\n")
	runID := e.trigger("tags")
	linux := e.register("linux-box", []string{"linux"}, 1)
	now := e.dbNow().Add(time.Minute)
	e.exec(`UPDATE agents SET last_heartbeat_at = now() + interval '1 minute' WHERE id = $1`, linux)
	var queuedAt time.Time
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT queued_at FROM task_instances WHERE run_id = $1`, runID).Scan(&queuedAt))
	term := e.oldTerm()

	e.clock.Set(now)
	risk, err := e.reapers.AtRisk(e.ctx, &term, 15*time.Second)
	require.NoError(t, err)
	require.Len(t, risk.Queued, 1)
	q := risk.Queued[0]
	assert.Equal(t, "gpu", q.TaskID)
	assert.Equal(t, []string{"gpu", "linux"}, q.RequiredTags)
	assert.Equal(t, []string{"gpu"}, q.MissingTags)
	assert.Equal(t, 1, q.ActiveAgents)
	assert.Equal(t, e.th.DispatchLost-now.Sub(queuedAt), q.TimeLeft)
	assert.Contains(t, q.Outcome, "no active agent offers tags [gpu]")
}

package reaper_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// fleet is four agents, each running one started TI of one run, plus a
// queued TI that needs tag gpu, which only agents 0..2 offer. It returns
// the env, the run, the agents and each agent's task.
func fleet(t *testing.T) (*env, int64, []int64, []store.ClaimedTask) {
	t.Helper()
	e := newEnv(t)
	e.focus = map[state.Reaper]bool{state.ReaperAgentLost: true, state.ReaperDispatchLost: true}
	e.th.Orphan = 24 * time.Hour
	e.apply("dag_id: fleet\nmax_active_tasks: 5\ntasks:\n" +
		"  - id: t0\n    command: [\"true\"]\n  - id: t1\n    command: [\"true\"]\n" +
		"  - id: t2\n    command: [\"true\"]\n  - id: t3\n    command: [\"true\"]\n" +
		"  - id: g\n    command: [\"true\"]\n    tags: [gpu]\n")
	runID := e.trigger("fleet")
	var agents []int64
	var tasks []store.ClaimedTask
	for i := 0; i < 4; i++ {
		tags := []string{"gpu"}
		if i == 3 {
			tags = nil
		}
		a := e.register(fmt.Sprintf("agent-%d", i), tags, 1)
		got := e.claim(a, 1)
		require.Len(t, got, 1, "agent %d", i)
		require.NotEqual(t, "g", got[0].TaskID, "t0..t3 are queued first")
		e.started(a, got...)
		agents, tasks = append(agents, a), append(tasks, got...)
	}
	require.Equal(t, state.TIQueued, e.ti(runID, "g").State)
	e.exec(`UPDATE task_instances SET queued_at = now() - interval '10 minutes' WHERE run_id = $1 AND task_id = 'g'`, runID)
	return e, runID, agents, tasks
}

// silence makes agent a look silent for d: its own heartbeat and its
// running TIs' (with oldest_heartbeat_at, as ageHeartbeat keeps it).
func (e *env) silence(a int64, d time.Duration) {
	e.ageHeartbeat("agent_id = $1 AND state = 'running'", d, a)
	e.exec(`UPDATE agents SET last_heartbeat_at = now() - $2 * interval '1 microsecond' WHERE id = $1`, a, d.Microseconds())
}

// The mass-silence brake, one side: one dead agent among four is reaped as
// usual; the brake does not engage.
func TestMassSilenceBrakeLetsOneDeadAgentAmongFourBeReaped(t *testing.T) {
	t.Parallel()
	e, runID, agents, tasks := fleet(t)
	e.silence(agents[0], 100*time.Second)

	rep := e.sweepAt(e.dbNow(), e.oldTerm())
	assert.NotContains(t, rep.GraceText(), "mass-silence")
	assert.Equal(t, state.TIFailed, e.ti(runID, tasks[0].TaskID).State, "the dead agent's task is reaped")
	assert.Equal(t, state.ReasonAgentLost, e.ti(runID, tasks[0].TaskID).Reason)
	for _, task := range tasks[1:] {
		assert.Equal(t, state.TIRunning, e.ti(runID, task.TaskID).State)
	}
	assert.Equal(t, 1.0, e.decisions("agent_lost"))
	assert.Zero(t, e.decisions("agent_lost_held"))
	assert.False(t, e.reapers.Brake().Engaged)
	assert.Equal(t, 1, e.reapers.Brake().Silent)
	assert.Equal(t, 4, e.reapers.Brake().Active)
}

// The mass-silence brake, the other side: three of four agents silent within
// one threshold window hold agent-lost and dispatch-lost (counted, and
// shown as the brake's state); when two come back the fraction recovers,
// the brake releases, and the one still silent is reaped.
func TestMassSilenceBrakeHoldsThreeSilentAmongFourUntilTheyReturn(t *testing.T) {
	t.Parallel()
	e, runID, agents, tasks := fleet(t)
	for i, d := range []time.Duration{100 * time.Second, 110 * time.Second, 120 * time.Second} {
		e.silence(agents[i], d)
	}
	now := e.dbNow()
	for sweep := 0; sweep < 2; sweep++ {
		rep := e.sweepAt(now.Add(time.Duration(sweep)*time.Second), e.oldTerm())
		assert.Empty(t, rep.Candidates, "sweep %d: held", sweep)
		assert.Contains(t, rep.GraceText(), "mass-silence brake engaged: 3 of 4 active agents went silent")
	}
	for _, task := range tasks {
		assert.Equal(t, state.TIRunning, e.ti(runID, task.TaskID).State, "%s is not reaped", task.TaskID)
	}
	assert.Equal(t, state.TIQueued, e.ti(runID, "g").State, "dispatch-lost is held too: the gpu agents may be alive")
	assert.Equal(t, 2.0, e.decisions("agent_lost_held"), "one per held agent-lost pass")
	assert.Equal(t, 2.0, e.decisions("dispatch_lost_held"))
	assert.Zero(t, e.decisions("agent_lost"))
	assert.Zero(t, e.decisions("dispatch_lost"))
	b := e.reapers.Brake()
	assert.True(t, b.Engaged)
	assert.Equal(t, 3, b.Silent)
	assert.Equal(t, 4, b.Active)
	assert.Equal(t, now, b.Since, "since the first held pass")
	assert.Equal(t, 1.0, testutil.ToFloat64(e.metrics.MassSilenceBrake))

	// Two come back (their heartbeats refresh their tasks): 1 of 4 silent.
	e.started(agents[1], tasks[1])
	e.started(agents[2], tasks[2])
	rep := e.sweepAt(e.dbNow(), e.oldTerm())
	assert.NotContains(t, rep.GraceText(), "mass-silence")
	assert.False(t, e.reapers.Brake().Engaged, "released")
	assert.Zero(t, testutil.ToFloat64(e.metrics.MassSilenceBrake))
	assert.Equal(t, state.TIFailed, e.ti(runID, tasks[0].TaskID).State, "the one still silent is reaped")
	for _, task := range tasks[1:] {
		assert.Equal(t, state.TIRunning, e.ti(runID, task.TaskID).State)
	}
	assert.Equal(t, state.TIQueued, e.ti(runID, "g").State, "live gpu agents cover g again: a backlog")
	assert.Equal(t, 2.0, e.decisions("agent_lost_held"), "nothing more held")
}

// An operator's forced sweep (vigil reap: Term.Force) is not held, and
// says it bypassed the brake; a dry run lists what it would do.
func TestMassSilenceBrakeIsBypassedByAForcedSweep(t *testing.T) {
	t.Parallel()
	e, runID, agents, tasks := fleet(t)
	for i := 0; i < 3; i++ {
		e.silence(agents[i], 100*time.Second)
	}
	e.clock.Set(e.dbNow())
	dry, err := e.reapers.DryRun(e.ctx, e.oldTerm())
	require.NoError(t, err)
	assert.Contains(t, dry.GraceText(), "bypassed by this forced sweep")
	n := 0
	for _, c := range dry.Candidates {
		if c.Decision == "agent_lost" {
			n++
		}
	}
	assert.Equal(t, 3, n, "the dry run lists the three tasks a forced sweep would reap")
	assert.False(t, e.reapers.Brake().Engaged, "a dry run is not the leader's verdict")

	term := e.oldTerm()
	term.Force = true
	rep, err := e.reapers.Sweep(e.ctx, term)
	require.NoError(t, err)
	assert.Contains(t, rep.GraceText(), "bypassed by this forced sweep")
	for _, task := range tasks[:3] {
		assert.Equal(t, state.TIFailed, e.ti(runID, task.TaskID).State)
	}
	assert.Equal(t, state.TIFailed, e.ti(runID, "g").State, "no active agent offers gpu")
	assert.Zero(t, e.decisions("agent_lost_held"))
}

// The brake's settings: 0 disables it; errors name the flag.
// TestMassSilenceBoundaries pins the brake's two inequalities at their
// edges: exactly half silent does not engage it, one more does; a fleet
// of exactly MinAgents is judged, one fewer is not.
func TestMassSilenceBoundaries(t *testing.T) {
	m := reaper.DefaultMassSilence() // more than 50 %, at least 3 active
	for _, c := range []struct {
		silent, active int
		want           bool
	}{
		{2, 4, false}, // exactly half
		{3, 4, true},
		{3, 6, false}, // exactly half of an even fleet
		{4, 6, true},
		{2, 3, true},  // MinAgents active: judged
		{2, 2, false}, // fewer than MinAgents: never engaged
		{0, 3, false},
	} {
		assert.Equal(t, c.want, m.Engages(c.silent, c.active), "%d silent of %d active", c.silent, c.active)
	}
	assert.False(t, reaper.MassSilence{Fraction: 0, MinAgents: 1}.Engages(5, 5), "fraction 0 disables the brake")
}

func TestMassSilenceConfig(t *testing.T) {
	t.Parallel()
	require.NoError(t, reaper.DefaultMassSilence().Validate())
	require.NoError(t, reaper.MassSilence{Fraction: 0, MinAgents: 3}.Validate())
	err := reaper.MassSilence{Fraction: 1, MinAgents: 0}.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mass-silence-fraction: 1 must be at least 0")
	assert.Contains(t, err.Error(), "mass-silence-min-agents: 0 must be at least 1")
	require.NoError(t, reaper.MassSilence{Fraction: 0.99, MinAgents: 1}.Validate(), "the bounds' other sides")

	e, runID, agents, tasks := fleet(t)
	e.reapers = e.reapersWith(func(c *reaper.Config) { c.MassSilence = &reaper.MassSilence{Fraction: 0, MinAgents: 3} })
	for i := 0; i < 3; i++ {
		e.silence(agents[i], 100*time.Second)
	}
	e.sweepAt(e.dbNow(), e.oldTerm())
	assert.Equal(t, state.TIFailed, e.ti(runID, tasks[0].TaskID).State, "disabled: reaped as before")
	assert.Zero(t, e.decisions("agent_lost_held"))
}

// vigil reap sent to a follower reaches the leader as a recorded request
// (store.RequestForcedSweep): the leader's next held passes let it through
// once each, as a forced sweep on the leader would, every page of it.
func TestMassSilenceBrakeIsBypassedOnceByAForcedSweepThroughAFollower(t *testing.T) {
	t.Parallel()
	e, runID, agents, tasks := fleet(t)
	e.reapers = e.reapersWith(batchOf(2)) // pages of 2: the three silent tasks take two
	for i := 0; i < 3; i++ {
		e.silence(agents[i], 100*time.Second)
	}
	now := e.dbNow()
	e.sweepAt(now, e.oldTerm())
	require.Equal(t, 1.0, e.decisions("agent_lost_held"))
	require.Equal(t, state.TIRunning, e.ti(runID, tasks[0].TaskID).State)

	require.NoError(t, e.store.RequestForcedSweep(e.ctx))
	rep := e.sweepAt(now.Add(time.Second), e.oldTerm())
	assert.Contains(t, rep.GraceText(), "bypassed by the forced sweep requested through a follower")
	for _, task := range tasks[:3] {
		assert.Equal(t, state.TIFailed, e.ti(runID, task.TaskID).State)
	}
	assert.Equal(t, state.TIFailed, e.ti(runID, "g").State)
	assert.Equal(t, 1.0, e.decisions("agent_lost_held"), "the forced passes were not held")

	e.sweepAt(now.Add(2*time.Second), e.oldTerm())
	assert.Equal(t, 2.0, e.decisions("agent_lost_held"), "one request lets one pass through: the brake holds again")
	assert.True(t, e.reapers.Brake().Engaged)
}

// A held pass is counted under its own reaper's decision, and the brake's
// notice states the rule it applied.
func TestMassSilenceBrakeCountsEachHeldReaperUnderItsOwnDecision(t *testing.T) {
	t.Parallel()
	e, _, agents, _ := fleet(t)
	for i := 0; i < 3; i++ {
		e.silence(agents[i], 100*time.Second)
	}
	e.clock.Set(e.dbNow())
	rep, err := e.reapers.Pass(e.ctx, state.ReaperDispatchLost, e.oldTerm())
	require.NoError(t, err)
	assert.Contains(t, rep.GraceText(), "3 of 4 active agents went silent")
	assert.Contains(t, rep.GraceText(), "more than 50% of at least 3")
	assert.Equal(t, 1.0, e.decisions("dispatch_lost_held"))
	assert.Zero(t, e.decisions("agent_lost_held"), "only dispatch-lost passed")
}

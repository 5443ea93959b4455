package reaper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// A reaper's service pass runs that one reaper for the leader's current
// term, and nothing while there is no term: an agent-lost TI is reaped by
// the agent_lost service only, never by orphan's, and never termless.
func TestReaperServicePassRunsItsReaperForTheCurrentTerm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply(twoTasks)
	runID := e.trigger("two")
	agent := e.register("w", nil, 4)
	tasks := e.claim(agent, 2)
	require.Len(t, tasks, 2)
	e.started(agent, tasks...)
	e.clock.Set(e.dbNow().Add(100 * time.Second))

	var term *reaper.Term
	current := func() *reaper.Term { return term }
	lost := e.reapers.NewService(reaper.ServiceConfig{Name: state.ReaperAgentLost, Term: current})
	orphan := e.reapers.NewService(reaper.ServiceConfig{Name: state.ReaperOrphan, Term: current})

	require.NoError(t, lost.RunOnceForTest(e.ctx))
	assert.Equal(t, state.TIRunning, e.ti(runID, "a").State, "no term: no pass")
	assert.Empty(t, e.reapers.LastSweeps())

	old := e.oldTerm()
	term = &old
	require.NoError(t, orphan.RunOnceForTest(e.ctx))
	assert.Equal(t, state.TIRunning, e.ti(runID, "a").State, "the orphan service runs the orphan reaper only")
	require.NoError(t, lost.RunOnceForTest(e.ctx))
	assert.Equal(t, state.TIUpForRetry, e.ti(runID, "a").State)
	assert.Equal(t, state.TIFailed, e.ti(runID, "b").State)
	sweeps := e.reapers.LastSweeps()
	require.Len(t, sweeps, 2)
	assert.Equal(t, state.ReaperAgentLost, sweeps[0].Reaper)
	assert.Equal(t, 2, sweeps[0].Applied)
	assert.Equal(t, state.ReaperOrphan, sweeps[1].Reaper)

	term = &reaper.Term{Epoch: epoch + 1, GraceStart: old.GraceStart}
	e.exec(`UPDATE task_instances SET state = 'running' WHERE run_id = $1`, runID)
	err := lost.RunOnceForTest(e.ctx)
	assert.True(t, store.IsFenced(err), "a deposed term's pass returns the fenced error, got %v", err)
}

// Zero fields take the defaults; an unknown reaper or a missing Term is a
// programmer error.
func TestReaperServiceConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	term := func() *reaper.Term { return nil }
	assert.Equal(t, string(state.ReaperOrphan), e.reapers.NewService(reaper.ServiceConfig{Name: state.ReaperOrphan, Term: term}).
		Maintenance(nil).Name())
	assert.Panics(t, func() { e.reapers.NewService(reaper.ServiceConfig{Name: "nope", Term: term}) })
	assert.Panics(t, func() { e.reapers.NewService(reaper.ServiceConfig{Name: state.ReaperOrphan}) })
}

package reaper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// wideLate: a is reaped, x fails for real. b and c depend (transitively)
// on a alone; d on a and x; y on x alone; z keeps the run alive.
const wideLate = `dag_id: wide
tasks:
  - id: a
    command: ["true"]
  - id: x
    command: ["false"]
  - id: b
    command: ["true"]
    depends_on: [a]
  - id: c
    command: ["true"]
    depends_on: [b]
  - id: d
    command: ["true"]
    depends_on: [a, x]
  - id: y
    command: ["true"]
    depends_on: [x]
  - id: z
    command: ["true"]
`

// A late success reopens exactly its transitive
// dependents, not every upstream_failed TI of the run, so no duplicate
// upstream_failed events follow.
func TestLateSuccessReopensExactlyItsDependents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	e.apply(wideLate)
	runID := e.trigger("wide")
	agent := e.register("w", nil, 2)
	tasks := e.claim(agent, 2)
	require.Len(t, tasks, 2)
	byTask := map[string]store.ClaimedTask{}
	for _, task := range tasks {
		byTask[task.TaskID] = task
	}
	require.Contains(t, byTask, "a")
	require.Contains(t, byTask, "x")
	e.started(agent, tasks...)
	exit := 1
	_, _, err := e.store.Complete(e.ctx, agent, store.Completion{Attempt: byTask["x"].Attempt, Outcome: state.OutcomeFailed, ExitCode: &exit})
	require.NoError(t, err)
	e.sweepAt(e.dbNow().Add(100*time.Second), e.oldTerm())
	require.Equal(t, state.TIFailed, e.ti(runID, "a").State)
	e.schedule()
	for _, task := range []string{"b", "c", "d", "y"} {
		require.Equal(t, state.TIUpstreamFailed, e.ti(runID, task).State, task)
	}
	upstreamFailedEvents := func() map[string]int {
		evs, err := e.store.RunEvents(e.ctx, runID, 0)
		require.NoError(t, err)
		n := map[string]int{}
		for _, ev := range evs {
			if ev.Kind == "ti_upstream_failed" {
				n[ev.TaskID]++
			}
		}
		return n
	}
	require.Equal(t, map[string]int{"b": 1, "c": 1, "d": 1, "y": 1}, upstreamFailedEvents())

	_, late, err := e.store.Complete(e.ctx, agent, store.Completion{Attempt: byTask["a"].Attempt, Outcome: state.OutcomeSuccess})
	require.NoError(t, err)
	require.True(t, late)
	assert.Equal(t, state.TINone, e.ti(runID, "b").State, "b depends on a alone")
	assert.Equal(t, state.TINone, e.ti(runID, "c").State, "c depends on a through b")
	assert.Equal(t, state.TIUpstreamFailed, e.ti(runID, "d").State, "d's other upstream x really failed")
	assert.Equal(t, state.TIUpstreamFailed, e.ti(runID, "y").State, "y does not depend on a at all")
	reopened := 0
	for _, k := range e.eventKinds(runID) {
		if k == string(state.EventTIReopened) {
			reopened++
		}
	}
	assert.Equal(t, 2, reopened, "one ti_reopened event each for b and c")

	e.schedule()
	assert.Equal(t, state.TIQueued, e.ti(runID, "b").State)
	assert.Equal(t, state.TINone, e.ti(runID, "c").State, "c waits for b")
	assert.Equal(t, map[string]int{"b": 1, "c": 1, "d": 1, "y": 1}, upstreamFailedEvents(), "no duplicate upstream_failed events")
}

// With retries: 0 the run ends on the tick right after
// the reap. The agent's success arriving after that is not refused and
// lost: it is recorded on the TI's attempt history (an event, and
// TaskInstance.Late in GetRun), once, and the run's outcome stands
// (adr/0014-late-success-after-run-end.md).
func TestLateSuccessAfterRunEndIsRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	e.apply("dag_id: one\ntasks:\n  - id: a\n    command: [\"true\"]\n    retries: 0\n")
	runID := e.trigger("one")
	agent := e.register("w", nil, 1)
	tasks := e.claim(agent, 1)
	require.Len(t, tasks, 1)
	e.started(agent, tasks...)
	e.sweepAt(e.dbNow().Add(100*time.Second), e.oldTerm())
	e.schedule()
	require.Equal(t, state.RunFailed, e.run(runID).State, "the run ended right after the reap")
	require.Equal(t, state.ReasonAgentLost, e.ti(runID, "a").Reason)

	got, late, err := e.store.Complete(e.ctx, agent, store.Completion{Attempt: tasks[0].Attempt, Outcome: state.OutcomeSuccess})
	require.NoError(t, err, "a completion for the current attempt is never refused")
	assert.True(t, late)
	assert.Equal(t, state.TIFailed, got, "the TI keeps the state the run ended with")

	// A replay (the agent retrying after a lost reply) records nothing more.
	got, late, err = e.store.Complete(e.ctx, agent, store.Completion{Attempt: tasks[0].Attempt, Outcome: state.OutcomeSuccess})
	require.NoError(t, err)
	assert.False(t, late, "already recorded")
	assert.Equal(t, state.TIFailed, got)

	d := e.run(runID)
	assert.Equal(t, state.RunFailed, d.State, "the run's outcome stands")
	a := e.ti(runID, "a")
	assert.Equal(t, state.TIFailed, a.State)
	require.NotNil(t, a.Late, "runs show carries the late outcome")
	assert.False(t, a.Late.Accepted)
	assert.Equal(t, state.OutcomeSuccess, a.Late.Outcome)
	assert.Equal(t, 1, a.Late.TryNumber)
	assert.Equal(t, tasks[0].AttemptID, a.Late.AttemptID)
	assert.Contains(t, a.Late.Message, "after the run ended failed")
	n := 0
	for _, k := range e.eventKinds(runID) {
		if k == string(state.EventLateRecorded) {
			n++
		}
	}
	assert.Equal(t, 1, n, "runs events shows it once")

	// A late failure agrees with the reaper and is still refused.
	exit := 1
	_, _, err = e.store.Complete(e.ctx, agent, store.Completion{Attempt: tasks[0].Attempt, Outcome: state.OutcomeFailed, ExitCode: &exit})
	var stale *store.StaleAttemptError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, state.StopReaped, stale.Reason)
}

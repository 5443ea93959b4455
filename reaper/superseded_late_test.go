package reaper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// Found by the chaos suite (docs/reliability.md, seed 1): an agent
// stopped past the agent-lost threshold while its task ran; the task
// exited 0, the reaper failed the attempt, the retry was claimed by
// another agent, and when the first agent resumed its success was refused
// as stale and lost without a trace. A success of a reaped attempt whose
// TI was claimed again is now recorded (late_completion_recorded, on the
// reaped try) and changes nothing; a replay records nothing more.
func TestLateSuccessAfterTheRetryWasClaimedIsRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	e.apply("dag_id: sup\ntasks:\n  - id: a\n    retries: 1\n    command: [\"true\"]\n")
	runID := e.trigger("sup")
	first := e.register("first", nil, 1)
	tasks := e.claim(first, 1)
	require.Len(t, tasks, 1)
	reaped := tasks[0]
	e.started(first, reaped)

	e.sweepAt(e.dbNow().Add(100*time.Second), e.oldTerm())
	require.Equal(t, state.TIUpForRetry, e.ti(runID, "a").State)
	e.exec(`UPDATE task_instances SET next_retry_at = now() WHERE id = $1`, reaped.TIID)
	e.exec(`INSERT INTO run_dirty (run_id) VALUES ($1) ON CONFLICT DO NOTHING`, runID)
	e.schedule()
	second := e.register("second", nil, 1)
	retry := e.claim(second, 1)
	require.Len(t, retry, 1)
	require.NotEqual(t, reaped.AttemptID, retry[0].AttemptID)

	late := store.Completion{Attempt: reaped.Attempt, Outcome: state.OutcomeSuccess}
	st, recorded, err := e.store.Complete(e.ctx, first, late)
	require.NoError(t, err, "the reaped attempt's success is not refused as stale")
	assert.True(t, recorded)
	assert.Equal(t, state.TIRunning, st, "the retry's state is untouched")
	ti := e.ti(runID, "a")
	assert.Equal(t, retry[0].AttemptID, ti.AttemptID)
	require.NotNil(t, ti.Late)
	assert.Equal(t, reaped.AttemptID, ti.Late.AttemptID)
	assert.Equal(t, 1, ti.Late.TryNumber)
	assert.False(t, ti.Late.Accepted)

	_, recorded, err = e.store.Complete(e.ctx, first, late)
	require.NoError(t, err)
	assert.False(t, recorded, "a replay records nothing more")
	assert.Equal(t, 1, count(e.eventKinds(runID), string(state.EventLateRecorded)))

	failed := store.Completion{Attempt: reaped.Attempt, Outcome: state.OutcomeFailed}
	_, _, err = e.store.Complete(e.ctx, first, failed)
	require.Error(t, err, "a reaped attempt's late failure is still refused")
	_, _, err = e.store.Complete(e.ctx, second, store.Completion{Attempt: reaped.Attempt, Outcome: state.OutcomeSuccess})
	require.Error(t, err, "another agent cannot complete the reaped attempt")
}

func count(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// Found by the chaos suite (docs/reliability.md, the second 1,000-fault
// run): an agent was SIGSTOPped just after its claim reply spawned the
// task, before any heartbeat reported the start; the agent-lost reaper
// requeued the attempt as never started, another agent claimed it again
// (the same try) and when the first agent resumed, the success its task
// had reached while it was current was refused as stale and dropped. A
// requeue gives up on the attempt like a failing reap, so its success is
// recorded the same way.
func TestLateSuccessOfARequeuedAttemptIsRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	e.apply("dag_id: req\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	runID := e.trigger("req")
	first := e.register("first", nil, 1)
	tasks := e.claim(first, 1)
	require.Len(t, tasks, 1)
	requeued := tasks[0] // its start never reaches the control plane

	e.sweepAt(e.dbNow().Add(100*time.Second), e.oldTerm())
	require.Equal(t, state.TIScheduled, e.ti(runID, "a").State, "a never-started attempt is requeued")
	require.Equal(t, 1, count(e.eventKinds(runID), "agent_lost_requeued"))
	e.schedule()
	second := e.register("second", nil, 1)
	again := e.claim(second, 1)
	require.Len(t, again, 1)
	require.NotEqual(t, requeued.AttemptID, again[0].AttemptID)
	require.Equal(t, requeued.TryNumber, again[0].TryNumber, "a requeue spends no try")

	late := store.Completion{Attempt: requeued.Attempt, Outcome: state.OutcomeSuccess}
	st, recorded, err := e.store.Complete(e.ctx, first, late)
	require.NoError(t, err, "the requeued attempt's success is not refused as stale")
	assert.True(t, recorded)
	assert.Equal(t, state.TIRunning, st, "the new attempt's state is untouched")
	ti := e.ti(runID, "a")
	assert.Equal(t, again[0].AttemptID, ti.AttemptID)
	require.NotNil(t, ti.Late)
	assert.Equal(t, requeued.AttemptID, ti.Late.AttemptID)
	assert.False(t, ti.Late.Accepted)

	_, recorded, err = e.store.Complete(e.ctx, first, late)
	require.NoError(t, err)
	assert.False(t, recorded, "a replay records nothing more")
	assert.Equal(t, 1, count(e.eventKinds(runID), string(state.EventLateRecorded)))
	_, _, err = e.store.Complete(e.ctx, first, store.Completion{Attempt: requeued.Attempt, Outcome: state.OutcomeFailed})
	require.Error(t, err, "a requeued attempt's late failure is still refused")
}

package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
)

// TestSetPausedHidesTheDAGFromTheSchedulesService pauses and unpauses a
// scheduled DAG: paused, ScheduledDAGs leaves it out; a repeat reports
// no change; an unknown DAG is ErrNotFound.
func TestSetPausedHidesTheDAGFromTheSchedulesService(t *testing.T) {
	e := newSchedEnv(t)
	e.apply("dag_id: nightly\nschedule: \"@daily\"\nstart_date: 2026-01-01T00:00:00Z\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	ids := func() []string {
		list, err := e.st.ScheduledDAGs(e.ctx)
		require.NoError(t, err)
		var out []string
		for _, d := range list {
			out = append(out, d.Spec.DAGID)
		}
		return out
	}
	require.Equal(t, []string{"nightly"}, ids())

	changed, err := e.st.SetPaused(e.ctx, "nightly", true)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Empty(t, ids(), "a paused DAG is not scheduled")
	changed, err = e.st.SetPaused(e.ctx, "nightly", true)
	require.NoError(t, err)
	assert.False(t, changed, "a repeat changes nothing")

	changed, err = e.st.SetPaused(e.ctx, "nightly", false)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, []string{"nightly"}, ids())

	_, err = e.st.SetPaused(e.ctx, "nope", true)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestGetDAGScheduleReadsPauseNextSlotAndLastSlot reads a scheduled
// DAG's schedule state before and after the schedules service's pointer
// is set, and ErrNotFound for an unknown DAG.
func TestGetDAGScheduleReadsPauseNextSlotAndLastSlot(t *testing.T) {
	e := newSchedEnv(t)
	e.apply("dag_id: nightly\nschedule: \"@daily\"\nstart_date: 2026-01-01T00:00:00Z\npaused: true\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	d, err := e.st.GetDAGSchedule(e.ctx, "nightly")
	require.NoError(t, err)
	assert.Equal(t, "@daily", d.Spec.Schedule)
	assert.True(t, d.Paused)
	assert.Nil(t, d.NextSlot)
	assert.Nil(t, d.LastSlot)

	_, err = e.raw.Exec(e.ctx, `UPDATE dags SET next_slot = '2026-03-01T00:00:00Z' WHERE dag_id = 'nightly'`)
	require.NoError(t, err)
	d, err = e.st.GetDAGSchedule(e.ctx, "nightly")
	require.NoError(t, err)
	require.NotNil(t, d.NextSlot)
	assert.True(t, d.NextSlot.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)))

	_, err = e.st.GetDAGSchedule(e.ctx, "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestListAndGetDAGShowThePause: a pause is visible in ListDAGs and
// GetDAG (not only in a second pause's "already paused"), and both give
// the stored spec's size, the same from either.
func TestListAndGetDAGShowThePause(t *testing.T) {
	e := newSchedEnv(t)
	e.apply("dag_id: a\ntasks:\n  - id: x\n    command: [\"true\"]\n")
	e.apply("dag_id: b\npaused: true\nschedule: \"@daily\"\nstart_date: 2026-01-01T00:00:00Z\ntasks:\n  - id: y\n    command: [\"true\"]\n")
	_, err := e.st.SetPaused(e.ctx, "a", true)
	require.NoError(t, err)
	_, err = e.st.SetPaused(e.ctx, "b", false)
	require.NoError(t, err)

	list, err := e.st.ListDAGs(e.ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.True(t, list[0].Paused, "a was paused")
	assert.False(t, list[1].Paused, "b was unpaused: the spec's paused is only its initial state")
	for _, d := range list {
		_, one, err := e.st.GetDAG(e.ctx, d.DAGID)
		require.NoError(t, err)
		assert.Equal(t, d.Paused, one.Paused, "%s: GetDAG agrees with ListDAGs", d.DAGID)
		assert.Positive(t, one.SpecBytes, d.DAGID)
		assert.Equal(t, d.SpecBytes, one.SpecBytes, "%s: the same size from both", d.DAGID)
		assert.Equal(t, 1, one.Tasks)
	}
}

// TestReadLogsNamesAMissingRun: the logs of a run that does not exist
// are "run N: not found", not a missing task; a run without the task
// names the task.
func TestReadLogsNamesAMissingRun(t *testing.T) {
	e := newSchedEnv(t)
	e.apply("dag_id: a\ntasks:\n  - id: x\n    command: [\"true\"]\n")
	run := e.trigger("a")
	_, err := e.st.ReadLogs(e.ctx, run+100, "x", 0, store.LogCursor{}, 10)
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.Equal(t, fmt.Sprintf("run %d: not found", run+100), err.Error())
	_, err = e.st.ReadLogs(e.ctx, run, "validate", 0, store.LogCursor{}, 10)
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.Equal(t, fmt.Sprintf("run %d task \"validate\": not found", run), err.Error())
}

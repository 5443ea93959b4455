package store_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// chainYAML is a -> b -> c, plus d on its own; b may retry once when the
// test says so.
const chainYAML = "dag_id: chain\ntasks:\n" +
	"  - id: a\n    command: [\"true\"]\n" +
	"  - id: b\n    command: [\"true\"]\n    depends_on: [a]\n    retries: %d\n" +
	"  - id: c\n    command: [\"true\"]\n    depends_on: [b]\n" +
	"  - id: d\n    command: [\"true\"]\n"

// work drives a run as its agents would: scheduler passes, claims and
// completions, until no TI is queued; fail names the tasks whose next try
// fails. It returns the tries it ran, as "task#try".
func (e *schedEnv) work(agent int64, fail map[string]int) []string {
	e.t.Helper()
	var ran []string
	for range 50 {
		e.tick()
		tasks, err := e.st.Claim(e.ctx, agent, 10)
		require.NoError(e.t, err)
		if len(tasks) == 0 {
			e.tick()
			return ran
		}
		for _, task := range tasks {
			ran = append(ran, task.TaskID+"#"+strconv.Itoa(task.TryNumber))
			c := store.Completion{Attempt: task.Attempt, Outcome: state.OutcomeSuccess}
			if fail[task.TaskID] > 0 {
				fail[task.TaskID]--
				code := 1
				c.Outcome, c.ExitCode = state.OutcomeFailed, &code
			}
			_, _, err := e.st.Complete(e.ctx, agent, c)
			require.NoError(e.t, err)
		}
	}
	e.t.Fatal("the run never settled")
	return nil
}

func (e *schedEnv) tiOf(runID int64, taskID string) store.TaskInstance {
	e.t.Helper()
	return tiNamed(e.t, e.ctx, e.st, runID, taskID)
}

// tiNamed returns the TI of task taskID in run runID, as GetRun shows it.
func tiNamed(t *testing.T, ctx context.Context, st *store.Store, runID int64, taskID string) store.TaskInstance {
	t.Helper()
	d, err := st.GetRun(ctx, runID)
	require.NoError(t, err)
	for _, ti := range d.TaskInstances {
		if ti.TaskID == taskID {
			return ti
		}
	}
	t.Fatalf("no task %s in run %d", taskID, runID)
	return store.TaskInstance{}
}

func (e *schedEnv) eventMessages(runID int64, kind state.EventKind) []string {
	e.t.Helper()
	rows, err := e.raw.Query(e.ctx, `SELECT coalesce(task_id, 'run') || ': ' || message FROM events WHERE run_id = $1 AND kind = $2 ORDER BY id`,
		runID, string(kind))
	require.NoError(e.t, err)
	var out []string
	for rows.Next() {
		var m string
		require.NoError(e.t, rows.Scan(&m))
		out = append(out, m)
	}
	require.NoError(e.t, rows.Err())
	return out
}

// A run whose middle task failed is cleared with its defaults (every TI
// that ended failed, upstream_failed or skipped): b runs again as try 2,
// c (upstream_failed) with it, the run returns to running and ends
// success; each cleared TI's event names who cleared it and why.
func TestClearReRunsFailedTasksAsNewTries(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(fmt.Sprintf(chainYAML, 0))
	runID := e.trigger("chain")
	agent := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 4})
	assert.ElementsMatch(t, []string{"a#1", "d#1", "b#1"}, e.work(agent, map[string]int{"b": 1}))
	require.Equal(t, "failed", e.runState(runID))
	require.Equal(t, state.TIUpstreamFailed, e.tiOf(runID, "c").State)

	dry, err := e.st.ClearTIs(e.ctx, store.ClearRequest{RunID: runID, DryRun: true, Actor: "tester"})
	require.NoError(t, err)
	assert.Equal(t, []store.ClearedTI{{TaskID: "b", State: state.TIFailed, TryNumber: 1}, {TaskID: "c", State: state.TIUpstreamFailed}},
		dry.Cleared)
	assert.Equal(t, state.RunFailed, dry.Run.State, "a dry run writes nothing")

	res, err := e.st.ClearTIs(e.ctx, store.ClearRequest{RunID: runID, Actor: "tester", Reason: "flaky network"})
	require.NoError(t, err)
	assert.Equal(t, dry.Cleared, res.Cleared)
	assert.Equal(t, state.RunRunning, res.Run.State)
	b := e.tiOf(runID, "b")
	assert.Equal(t, state.TINone, b.State)
	assert.Equal(t, 1, b.TryNumber, "try_number keeps counting")
	assert.Empty(t, b.AttemptID, "the cleared attempt is no longer current")
	assert.Equal(t, []string{
		"b: cleared by tester (try 1 was failed); the next try is 2: flaky network",
		"c: cleared by tester (was upstream_failed); the next try is 1: flaky network",
	}, e.eventMessages(runID, state.EventTICleared))

	assert.Equal(t, []string{"b#2", "c#1"}, e.work(agent, nil))
	assert.Equal(t, "success", e.runState(runID))
	assert.Equal(t, state.TISuccess, e.tiOf(runID, "b").State)
	assert.Equal(t, 2, e.tiOf(runID, "b").TryNumber)
	assert.Len(t, e.eventMessages(runID, state.EventRunReopened), 1)
}

// A clear of one task returns to none the upstream_failed TIs only it
// blocked (re-derived), and a cleared TI gets its retries again.
func TestClearOneTaskRederivesDependentsAndRestoresRetries(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(fmt.Sprintf(chainYAML, 1))
	runID := e.trigger("chain")
	agent := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 4})
	ran := e.work(agent, map[string]int{"b": 2})
	assert.Contains(t, ran, "b#2")
	require.Equal(t, "failed", e.runState(runID))
	require.Equal(t, 2, e.tiOf(runID, "b").MaxTries)

	res, err := e.st.ClearTIs(e.ctx, store.ClearRequest{RunID: runID, TaskIDs: []string{"b"}, Actor: "tester"})
	require.NoError(t, err)
	assert.Equal(t, []store.ClearedTI{{TaskID: "b", State: state.TIFailed, TryNumber: 2},
		{TaskID: "c", State: state.TIUpstreamFailed, Rederived: true}}, res.Cleared)
	assert.Equal(t, 4, e.tiOf(runID, "b").MaxTries, "tries 3 and 4: one try and its retry again")

	// Try 3 fails and is retried (the budget is back), try 4 succeeds.
	assert.Equal(t, []string{"b#3", "b#4", "c#1"}, e.work(agent, map[string]int{"b": 1}))
	assert.Equal(t, "success", e.runState(runID))
}

// A clear whose selection holds a TI an agent holds is refused with a
// conflict naming it, and writes nothing: the failed TI it also named
// stays failed, the run stays as it was.
func TestClearRefusesARunningTIAndWritesNothing(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply("dag_id: two\ntasks:\n  - id: x\n    command: [\"true\"]\n  - id: y\n    command: [\"true\"]\n")
	runID := e.trigger("two")
	e.tick()
	agent := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 2})
	tasks, err := e.st.Claim(e.ctx, agent, 2)
	require.NoError(t, err)
	require.Len(t, tasks, 2)
	for _, task := range tasks {
		if task.TaskID == "x" {
			code := 1
			_, _, err := e.st.Complete(e.ctx, agent, store.Completion{Attempt: task.Attempt, Outcome: state.OutcomeFailed, ExitCode: &code})
			require.NoError(t, err)
		}
	}
	e.tick()
	before := e.count(`SELECT count(*) FROM events WHERE run_id = $1`, runID)

	_, err = e.st.ClearTIs(e.ctx, store.ClearRequest{RunID: runID, TaskIDs: []string{"x", "y"}, Actor: "tester"})
	require.ErrorIs(t, err, store.ErrConflict)
	assert.Contains(t, err.Error(), "y is running (try 1)")
	assert.Equal(t, state.TIFailed, e.tiOf(runID, "x").State)
	assert.Equal(t, before, e.count(`SELECT count(*) FROM events WHERE run_id = $1`, runID))

	// The default selection leaves the running TI alone.
	res, err := e.st.ClearTIs(e.ctx, store.ClearRequest{RunID: runID, Actor: "tester"})
	require.NoError(t, err)
	assert.Equal(t, []store.ClearedTI{{TaskID: "x", State: state.TIFailed, TryNumber: 1}}, res.Cleared)

	_, err = e.st.ClearTIs(e.ctx, store.ClearRequest{RunID: runID, TaskIDs: []string{"nope"}, Actor: "tester"})
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.Contains(t, err.Error(), `task_ids: "nope": not a task of run`)
	_, err = e.st.ClearTIs(e.ctx, store.ClearRequest{RunID: runID + 100, Actor: "tester"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

// A cancelled run is not cleared or marked.
func TestClearAndMarkRefuseACancelledRun(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply("dag_id: one\ntasks:\n  - id: x\n    command: [\"true\"]\n")
	runID := e.trigger("one")
	e.tick()
	_, err := e.st.CancelRun(e.ctx, runID, state.ReasonCancelled, "cancelled by test")
	require.NoError(t, err)
	_, err = e.st.ClearTIs(e.ctx, store.ClearRequest{RunID: runID, TaskIDs: []string{"x"}, Actor: "tester"})
	require.ErrorIs(t, err, store.ErrConflict)
	_, err = e.st.MarkTI(e.ctx, store.MarkRequest{RunID: runID, TaskID: "x", To: state.TISuccess, Actor: "tester"})
	require.ErrorIs(t, err, store.ErrConflict)
}

// The success of an attempt that was cleared (its agent was cut off, the
// agent-lost reaper failed it, an operator cleared it) is recorded on
// the TI's history and never overrides it: not while it waits for its
// next try, not once the next try runs.
func TestClearedAttemptsLateSuccessIsRecordedNotApplied(t *testing.T) {
	t.Parallel()
	r := newLateRace(t)
	ctx, st := r.ctx, r.st
	r.drain(t)
	require.Equal(t, state.TIUpstreamFailed, r.ti(t, "b").State)

	res, err := st.ClearTIs(ctx, store.ClearRequest{RunID: r.runID, TaskIDs: []string{"a"}, Actor: "tester"})
	require.NoError(t, err)
	require.Len(t, res.Cleared, 2, "a, and b re-derived")

	late := store.Completion{Attempt: r.a, Outcome: state.OutcomeSuccess}
	got, wasLate, err := st.Complete(ctx, r.agentID, late)
	require.NoError(t, err)
	assert.True(t, wasLate, "recorded")
	assert.Equal(t, state.TINone, got)
	a := r.ti(t, "a")
	assert.Equal(t, state.TINone, a.State, "the late success did not override the clear")
	require.NotNil(t, a.Late)
	assert.False(t, a.Late.Accepted)
	assert.Contains(t, a.Late.Message, "arrived after the task instance was cleared")
	assert.Equal(t, state.TINone, r.ti(t, "b").State, "b waits for a's next try")

	// The next try is claimed; the old attempt's replay still changes nothing.
	r.drain(t)
	agent2 := storetest.Agent(t, st, store.Registration{Name: "w2", Capacity: 4})
	tasks, err := st.Claim(ctx, agent2, 4)
	require.NoError(t, err)
	var next *store.ClaimedTask
	for i := range tasks {
		if tasks[i].TaskID == "a" {
			next = &tasks[i]
		}
	}
	require.NotNil(t, next, "a is claimed again: %+v", tasks)
	assert.Equal(t, 2, next.TryNumber)
	got, wasLate, err = st.Complete(ctx, r.agentID, late)
	require.NoError(t, err)
	assert.False(t, wasLate, "a replay writes nothing new")
	assert.Equal(t, state.TIRunning, got)
	assert.Equal(t, next.AttemptID, r.ti(t, "a").AttemptID)
	got, _, err = st.Complete(ctx, agent2, store.Completion{Attempt: next.Attempt, Outcome: state.OutcomeSuccess})
	require.NoError(t, err)
	assert.Equal(t, state.TISuccess, got)
	assert.Equal(t, 1, r.events(t, string(state.EventLateRecorded), "a"))
}

// Marking a failed TI success lets its dependents run (and the run end
// success); marking a TI failed makes its all_success dependents
// upstream_failed and fails the run with reason marked. A TI an agent
// holds is refused.
func TestMarkSetsStateAndDependentsFollow(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(fmt.Sprintf(chainYAML, 0))
	agent := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 4})

	runID := e.trigger("chain")
	e.work(agent, map[string]int{"b": 1})
	require.Equal(t, "failed", e.runState(runID))
	res, err := e.st.MarkTI(e.ctx, store.MarkRequest{RunID: runID, TaskID: "b", To: state.TISuccess, Actor: "tester", Reason: "fixed by hand"})
	require.NoError(t, err)
	assert.Equal(t, []store.MarkedTI{{TaskID: "b", State: state.TIFailed}}, res.Marked)
	assert.Equal(t, []string{"c"}, res.Reopened)
	assert.Equal(t, state.RunRunning, res.Run.State)
	b := e.tiOf(runID, "b")
	assert.Equal(t, state.TISuccess, b.State)
	assert.Equal(t, state.ReasonMarked, b.Reason)
	assert.Equal(t, []string{"b: marked success by tester (was failed): fixed by hand"}, e.eventMessages(runID, state.EventTIMarked))
	assert.Equal(t, []string{"c#1"}, e.work(agent, nil))
	assert.Equal(t, "success", e.runState(runID))

	runID = e.trigger("chain")
	e.tick()
	tasks, err := e.st.Claim(e.ctx, agent, 4)
	require.NoError(t, err)
	require.Len(t, tasks, 2, "a and d")
	_, err = e.st.MarkTI(e.ctx, store.MarkRequest{RunID: runID, TaskID: "a", To: state.TIFailed, Actor: "tester"})
	require.ErrorIs(t, err, store.ErrConflict)
	assert.Contains(t, err.Error(), "a is running (try 1)")
	// b waits for a: mark it failed before it runs.
	_, err = e.st.MarkTI(e.ctx, store.MarkRequest{RunID: runID, TaskID: "b", To: state.TIFailed, Actor: "tester"})
	require.NoError(t, err)
	for _, task := range tasks {
		_, _, err := e.st.Complete(e.ctx, agent, store.Completion{Attempt: task.Attempt, Outcome: state.OutcomeSuccess})
		require.NoError(t, err)
	}
	assert.Empty(t, e.work(agent, nil), "nothing runs after the mark")
	assert.Equal(t, state.TIUpstreamFailed, e.tiOf(runID, "c").State)
	d, err := e.st.GetRun(e.ctx, runID)
	require.NoError(t, err)
	assert.Equal(t, state.RunFailed, d.State)
	assert.Equal(t, state.ReasonMarked, d.Reason)

	_, err = e.st.MarkTI(e.ctx, store.MarkRequest{RunID: runID, TaskID: "b", To: state.TIQueued, Actor: "tester"})
	assert.ErrorContains(t, err, `state: "queued" is neither success nor failed`)
	assert.False(t, errors.Is(err, store.ErrConflict))
}

// A clear re-derives the dependents whose state the scheduler derived
// from the cleared TI, under their trigger rules: j (one_success) was
// upstream_failed after a and b failed; clearing a alone lets j run once
// a succeeds, though b stays failed. y was skipped (trigger_rule) after x
// exited with its skip_exit_code; clearing x runs x and then y.
func TestClearRederivesUnderTriggerRules(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply("dag_id: rules\ntasks:\n" +
		"  - id: a\n    command: [\"true\"]\n" +
		"  - id: b\n    command: [\"true\"]\n" +
		"  - id: j\n    command: [\"true\"]\n    depends_on: [a, b]\n    trigger_rule: one_success\n" +
		"  - id: x\n    command: [\"true\"]\n    skip_exit_code: 99\n" +
		"  - id: y\n    command: [\"true\"]\n    depends_on: [x]\n")
	runID := e.trigger("rules")
	agent := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 8})
	e.tick()
	tasks, err := e.st.Claim(e.ctx, agent, 8)
	require.NoError(t, err)
	require.Len(t, tasks, 3, "a, b and x")
	for _, task := range tasks {
		code := 1
		if task.TaskID == "x" {
			code = 99
		}
		_, _, err := e.st.Complete(e.ctx, agent, store.Completion{Attempt: task.Attempt, Outcome: state.OutcomeFailed, ExitCode: &code})
		require.NoError(t, err)
	}
	e.work(agent, nil)
	require.Equal(t, "failed", e.runState(runID))
	require.Equal(t, state.TIUpstreamFailed, e.tiOf(runID, "j").State)
	require.Equal(t, state.TISkipped, e.tiOf(runID, "x").State)
	require.Equal(t, state.TISkipped, e.tiOf(runID, "y").State)

	res, err := e.st.ClearTIs(e.ctx, store.ClearRequest{RunID: runID, TaskIDs: []string{"a", "x"}, Actor: "tester"})
	require.NoError(t, err)
	assert.Equal(t, []store.ClearedTI{{TaskID: "a", State: state.TIFailed, TryNumber: 1},
		{TaskID: "j", State: state.TIUpstreamFailed, Rederived: true},
		{TaskID: "x", State: state.TISkipped, TryNumber: 1},
		{TaskID: "y", State: state.TISkipped, Rederived: true}}, res.Cleared)
	assert.Equal(t, []string{"a#2", "x#2", "j#1", "y#1"}, e.work(agent, nil))
	assert.Equal(t, state.TISuccess, e.tiOf(runID, "j").State)
	assert.Equal(t, state.TIFailed, e.tiOf(runID, "b").State)
	assert.Equal(t, "failed", e.runState(runID), "b still failed")
}

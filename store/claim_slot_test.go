package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestClaimCarriesTheRunsSlot checks a claim hands the agent its run's
// type and slot (the task's VIGIL_RUN_TYPE, VIGIL_LOGICAL_DATE and data
// interval): a manual run has no slot, a scheduled run its own.
func TestClaimCarriesTheRunsSlot(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	agentID := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 10})
	e.apply("dag_id: slot\ntasks:\n  - id: t\n    command: [\"true\"]\n")

	manual := e.trigger("slot")
	e.tick()
	tasks, err := e.st.Claim(e.ctx, agentID, 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, manual, tasks[0].RunID)
	assert.Equal(t, store.RunManual, tasks[0].RunType)
	assert.Nil(t, tasks[0].LogicalDate)
	assert.Nil(t, tasks[0].IntervalStart)
	assert.Nil(t, tasks[0].IntervalEnd)

	// Forge the second run into a scheduled slot before its TI is queued.
	sched := e.trigger("slot")
	start := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	end := start.Add(24 * time.Hour)
	_, err = e.raw.Exec(e.ctx, `UPDATE runs SET run_type = 'scheduled', logical_date = $2,
		data_interval_start = $2, data_interval_end = $3 WHERE id = $1`, sched, start, end)
	require.NoError(t, err)
	e.tick()
	tasks, err = e.st.Claim(e.ctx, agentID, 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, sched, tasks[0].RunID)
	assert.Equal(t, store.RunScheduled, tasks[0].RunType)
	require.NotNil(t, tasks[0].LogicalDate)
	require.NotNil(t, tasks[0].IntervalStart)
	require.NotNil(t, tasks[0].IntervalEnd)
	assert.True(t, start.Equal(*tasks[0].LogicalDate))
	assert.True(t, start.Equal(*tasks[0].IntervalStart))
	assert.True(t, end.Equal(*tasks[0].IntervalEnd))
}

// TestTriggerRunConfReachesTheClaim checks a run's conf is checked
// against the DAG's params, stored with defaults filled (runs.conf,
// migration 007) and handed to the claim as strings.
func TestTriggerRunConfReachesTheClaim(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	agentID := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 10})
	e.apply("dag_id: conf\nparams:\n  region: {type: string, default: eu}\n  n: {type: int}\n  dry: {type: bool, default: true}\n" +
		"  ratio: {type: float}\ntasks:\n  - id: t\n    command: [\"true\"]\n")

	_, err := e.st.TriggerRunConf(e.ctx, "conf", map[string]any{"regoin": "x"})
	var ce *dag.ConfError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "regoin", ce.Key)
	_, err = e.st.TriggerRunConf(e.ctx, "conf", map[string]any{"n": "many"})
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "must be a int")
	assert.Zero(t, e.count(`SELECT count(*) FROM runs`), "a rejected conf creates no run")

	run, err := e.st.TriggerRunConf(e.ctx, "conf", map[string]any{"n": "7", "ratio": 0.25})
	require.NoError(t, err)
	e.tick()
	tasks, err := e.st.Claim(e.ctx, agentID, 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, run.ID, tasks[0].RunID)
	assert.Equal(t, map[string]string{"region": "eu", "n": "7", "dry": "true", "ratio": "0.25"}, tasks[0].Params)

	plain := e.trigger("conf")
	e.tick()
	tasks, err = e.st.Claim(e.ctx, agentID, 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, plain, tasks[0].RunID)
	assert.Equal(t, map[string]string{"region": "eu", "dry": "true"}, tasks[0].Params, "defaults fill a plain trigger")
}

// TestClaimCarriesRunAsUser checks a task's run_as_user is snapshotted
// with its run (task_instances.run_as_user, migration 014) and handed to
// the claiming agent, and that a task without one claims with "".
func TestClaimCarriesRunAsUser(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	agentID := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 10})
	e.apply("dag_id: as\ntasks:\n  - id: etl\n    command: [\"true\"]\n    run_as_user: etl\n" +
		"  - id: plain\n    command: [\"true\"]\n")
	e.trigger("as")
	e.tick()
	tasks, err := e.st.Claim(e.ctx, agentID, 2)
	require.NoError(t, err)
	require.Len(t, tasks, 2)
	got := map[string]string{}
	for _, task := range tasks {
		got[task.TaskID] = task.RunAsUser
	}
	assert.Equal(t, map[string]string{"etl": "etl", "plain": ""}, got)
}

package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// schedEnv is a store holding the fence at epoch 1 plus a raw pool that
// reads what the scheduler wrote (and forges what a bug would leave).
type schedEnv struct {
	t   *testing.T
	ctx context.Context
	st  *store.Store
	raw *pgxpool.Pool
}

func newSchedEnv(t *testing.T) *schedEnv {
	t.Helper()
	return newSchedEnvWith(t, store.TestSignals{})
}

// newSchedEnvWith is newSchedEnv with a store that carries signals.
func newSchedEnvWith(t *testing.T, signals store.TestSignals) *schedEnv {
	t.Helper()
	ctx := context.Background()
	url := storetest.DB(t)
	st, err := store.OpenWithOptions(ctx, url, store.Options{TestSignals: signals})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	raw, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(raw.Close)
	require.NoError(t, st.AcquireFence(ctx, 1, "test"))
	return &schedEnv{t: t, ctx: ctx, st: st, raw: raw}
}

func (e *schedEnv) apply(yaml string) {
	spec, err := dag.Parse([]byte(yaml))
	require.NoError(e.t, err)
	_, err = e.st.ApplyDAG(e.ctx, spec)
	require.NoError(e.t, err)
}

func (e *schedEnv) trigger(dagID string) int64 {
	run, err := e.st.TriggerRun(e.ctx, dagID)
	require.NoError(e.t, err)
	return run.ID
}

// dbNow is the database clock.
func (e *schedEnv) dbNow() time.Time {
	e.t.Helper()
	now, err := e.st.Now(e.ctx)
	require.NoError(e.t, err)
	return now
}

func (e *schedEnv) tick() store.TickResult {
	res, err := e.st.ScheduleDirty(e.ctx, 1, 256)
	require.NoError(e.t, err)
	return res
}

func (e *schedEnv) count(sql string, args ...any) int {
	var n int
	require.NoError(e.t, e.raw.QueryRow(e.ctx, sql, args...).Scan(&n))
	return n
}

func (e *schedEnv) tiCount(runID int64, state string) int {
	return e.count(`SELECT count(*) FROM task_instances WHERE run_id = $1 AND state = $2`, runID, state)
}

func (e *schedEnv) runState(runID int64) string {
	var s string
	require.NoError(e.t, e.raw.QueryRow(e.ctx, `SELECT state FROM runs WHERE id = $1`, runID).Scan(&s))
	return s
}

const fiveWide = "dag_id: wide\nmax_active_tasks: 2\ntasks:\n" +
	"  - id: a\n    command: [\"true\"]\n  - id: b\n    command: [\"true\"]\n  - id: c\n    command: [\"true\"]\n" +
	"  - id: d\n    command: [\"true\"]\n  - id: e\n    command: [\"true\"]\n"

// A tick looks only at runs marked dirty; a run whose mark was lost (a
// bug) is found by the reconcile, which counts what it moved.
func TestTickWorksOnDirtyRunsAndReconcileCatchesTheRest(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(fiveWide)
	marked, lost := e.trigger("wide"), e.trigger("wide")
	_, err := e.raw.Exec(e.ctx, `DELETE FROM run_dirty WHERE run_id = $1`, lost)
	require.NoError(t, err)

	res := e.tick()
	assert.Equal(t, 1, res.Runs)
	assert.Equal(t, "running", e.runState(marked))
	assert.Equal(t, 2, e.tiCount(marked, "queued"))
	assert.Equal(t, "queued", e.runState(lost), "a run without a mark is not the tick's business")
	assert.Zero(t, e.tick().Runs, "the queue is drained")

	rec, last, err := e.st.ReconcileRuns(e.ctx, 1, 0, store.PassLimit{Runs: 500})
	require.NoError(t, err)
	assert.Zero(t, last, "one batch covers both runs")
	assert.Equal(t, 2, rec.Runs)
	assert.Equal(t, 1, rec.Started, "only the run the tick missed moves")
	assert.Equal(t, 2, rec.Queued)
	assert.Equal(t, "running", e.runState(lost))

	rec, _, err = e.st.ReconcileRuns(e.ctx, 1, 0, store.PassLimit{Runs: 500})
	require.NoError(t, err)
	assert.Zero(t, rec.Moved(), "nothing left to repair")
}

// max_active_tasks is per run and snapshotted at trigger time:
// re-applying the DAG with another cap leaves runs in flight alone.
func TestMaxActiveTasksIsPerRunAndSnapshotted(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(fiveWide)
	first := e.trigger("wide")
	e.apply("dag_id: wide\nmax_active_tasks: 4\ntasks:\n" +
		"  - id: a\n    command: [\"true\"]\n  - id: b\n    command: [\"true\"]\n  - id: c\n    command: [\"true\"]\n" +
		"  - id: d\n    command: [\"true\"]\n  - id: e\n    command: [\"true\"]\n")
	second := e.trigger("wide")
	e.tick()
	assert.Equal(t, 2, e.tiCount(first, "queued"), "the first run keeps the cap it was triggered with")
	assert.Equal(t, 4, e.tiCount(second, "queued"), "each run has its own cap")

	// Finishing one queued TI of the first run frees one slot of that run
	// at the next tick, through the mark the completion wrote.
	_, err := e.raw.Exec(e.ctx, `
		WITH t AS (UPDATE task_instances SET state = 'success', end_date = now()
		            WHERE id = (SELECT min(id) FROM task_instances WHERE run_id = $1 AND state = 'queued')
		           RETURNING run_id)
		INSERT INTO run_dirty (run_id) SELECT run_id FROM t`, first)
	require.NoError(t, err)
	res := e.tick()
	assert.Equal(t, 1, res.Runs)
	assert.Equal(t, 1, res.Queued)
	assert.Equal(t, 2, e.tiCount(first, "queued"))
}

// Many marks of one run (a burst of completions) cost one pass over it,
// and a pass finalizes the run it completes.
func TestABurstOfMarksIsOnePass(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply("dag_id: one\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	run := e.trigger("one")
	e.tick()
	_, err := e.raw.Exec(e.ctx, `UPDATE task_instances SET state = 'success', end_date = now() WHERE run_id = $1`, run)
	require.NoError(t, err)
	_, err = e.raw.Exec(e.ctx, `INSERT INTO run_dirty (run_id) SELECT $1 FROM generate_series(1, 50)`, run)
	require.NoError(t, err)
	res := e.tick()
	assert.Equal(t, 1, res.Runs)
	assert.Equal(t, 1, res.Finalized)
	assert.Equal(t, "success", e.runState(run))
	assert.Zero(t, e.count(`SELECT count(*) FROM run_dirty`))
}

// A run the scheduler cannot move (here a forged dependency cycle) is
// marked idle_since: the orphan reaper's candidate. The mark clears when
// the run has an active TI again.
func TestIdleRunsAreMarkedForTheOrphanReaper(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply("dag_id: pair\ntasks:\n  - id: a\n    command: [\"true\"]\n  - id: b\n    command: [\"true\"]\n    depends_on: [a]\n")
	run := e.trigger("pair")
	_, err := e.raw.Exec(e.ctx, `UPDATE task_instances SET upstream = '{b}' WHERE run_id = $1 AND task_id = 'a'`, run)
	require.NoError(t, err)
	res := e.tick()
	assert.Equal(t, 1, res.Idle)
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM runs WHERE id = $1 AND idle_since IS NOT NULL`, run))

	_, err = e.raw.Exec(e.ctx, `UPDATE task_instances SET upstream = '{}' WHERE run_id = $1 AND task_id = 'a'`, run)
	require.NoError(t, err)
	_, err = e.raw.Exec(e.ctx, `INSERT INTO run_dirty (run_id) VALUES ($1)`, run)
	require.NoError(t, err)
	res = e.tick()
	assert.Zero(t, res.Idle)
	assert.Equal(t, 1, e.tiCount(run, "queued"))
	assert.Zero(t, e.count(`SELECT count(*) FROM runs WHERE id = $1 AND idle_since IS NOT NULL`, run))
}

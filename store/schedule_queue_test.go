package store_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
)

// tiUpdates runs one scheduler pass over run inside a transaction and
// returns the TickResult and the task_instances rows the pass updated,
// counted by PostgreSQL (pg_stat_xact_user_tables): each is a new row
// version with its index entries. The pass runs on a connection of its
// own, since PostgreSQL 15 adds to those counts the ones of the backend's
// earlier transactions that it has not flushed yet.
func tiUpdates(t *testing.T, e *schedEnv, run int64) (store.TickResult, int) {
	t.Helper()
	conn, err := pgx.Connect(e.ctx, e.raw.Config().ConnString())
	require.NoError(t, err)
	defer func() { _ = conn.Close(e.ctx) }()
	tx, err := conn.Begin(e.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(e.ctx) }()
	res, err := store.ScheduleRunsForTest(e.ctx, tx, []int64{run})
	require.NoError(t, err)
	var n int
	require.NoError(t, tx.QueryRow(e.ctx, `SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relname = 'task_instances'`).Scan(&n))
	require.NoError(t, tx.Commit(e.ctx))
	return res, n
}

// A ready TI with a place in its run is written once, none → queued; one
// without a place once, none → scheduled. Before the two steps were
// folded, every queued TI was written twice (docs/performance.md, "Fewer
// writes per TI").
func TestAReadyTIIsWrittenOnce(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(fiveWide) // max_active_tasks 2
	capped := e.trigger("wide")
	res, n := tiUpdates(t, e, capped)
	assert.Equal(t, 5, res.Scheduled, "every TI without upstreams is ready")
	assert.Equal(t, 2, res.Queued)
	assert.Equal(t, 5, n, "each TI is written once")
	assert.Equal(t, 2, e.tiCount(capped, "queued"))
	assert.Equal(t, 3, e.tiCount(capped, "scheduled"))

	e.apply(strings.NewReplacer("dag_id: wide", "dag_id: wide16", "max_active_tasks: 2", "max_active_tasks: 16").Replace(fiveWide))
	roomy := e.trigger("wide16")
	res, n = tiUpdates(t, e, roomy)
	assert.Equal(t, 5, res.Queued)
	assert.Equal(t, 5, n, "each TI is written once")
	assert.Equal(t, 5, e.tiCount(roomy, "queued"))
}

// The TIs queued are the first max_active_tasks − active by declaration
// order among the scheduled and the newly ready ones, as when the ready
// ones were scheduled first and the queue step chose among all.
func TestQueueingKeepsDeclarationOrderAcrossReadyAndScheduled(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply("dag_id: mixed\nmax_active_tasks: 2\ntasks:\n" +
		"  - id: a\n    command: [\"true\"]\n  - id: b\n    command: [\"true\"]\n    depends_on: [a]\n" +
		"  - id: c\n    command: [\"true\"]\n  - id: d\n    command: [\"true\"]\n  - id: e\n    command: [\"true\"]\n")
	run := e.trigger("mixed")
	e.tick()
	assert.Equal(t, []string{"a", "c"}, e.tasksIn(run, "queued"))
	assert.Equal(t, []string{"d", "e"}, e.tasksIn(run, "scheduled"))

	// a and c succeed: b becomes ready, declared before the waiting d and e.
	_, err := e.raw.Exec(e.ctx, `
		WITH t AS (UPDATE task_instances SET state = 'success', end_date = now()
		            WHERE run_id = $1 AND state = 'queued' RETURNING run_id)
		INSERT INTO run_dirty (run_id) SELECT DISTINCT run_id FROM t`, run)
	require.NoError(t, err)
	res := e.tick()
	assert.Equal(t, 1, res.Scheduled, "b became ready")
	assert.Equal(t, 2, res.Queued)
	assert.Equal(t, []string{"b", "d"}, e.tasksIn(run, "queued"))
	assert.Equal(t, []string{"e"}, e.tasksIn(run, "scheduled"))
}

// tasksIn lists the task ids of run's TIs in state st, in declaration
// order.
func (e *schedEnv) tasksIn(run int64, st string) []string {
	rows, err := e.raw.Query(e.ctx, `SELECT task_id FROM task_instances WHERE run_id = $1 AND state = $2 ORDER BY ordinal`, run, st)
	require.NoError(e.t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(e.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(e.t, rows.Err())
	return ids
}

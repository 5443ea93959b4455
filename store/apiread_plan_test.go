package store_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
)

// The API's reads at a year of history (issue 27): the first page of
// `runs list` with each combination of filters, a wide run's TIs
// (`runs show`), a page of its events and the grid of a DAG with no
// recent runs read what they return, not the history around them. Each
// statement runs under EXPLAIN ANALYZE with its real arguments, PREPAREd
// as pgx does (explainReads), in both plan modes (a prepared statement
// may settle on its generic plan; one the store sends planned with its
// arguments, in the custom mode only), at two history sizes ten times
// apart. The rows of work (every node's rows out and rows filtered away,
// times its loops) stay within the statement's own bound and do not grow
// with the history, and no node is a sequential scan. The grid has its
// own proof too (TestDAGGridReadsDoNotGrowWithHistory); at-risk reads the
// reapers' queries, which the scan proof covers (scanproof_test.go).
func TestAPIReadsDoNotGrowWithHistory(t *testing.T) {
	t.Parallel()
	// The cases marked execMode skip the generic plan on this promise.
	require.Equal(t, pgx.QueryExecModeExec, store.PlannedEachTimeForTest,
		"ListRuns and DAGGrid must be planned with their arguments each time: a generic plan reads a quiet DAG's whole history")
	e := newSchedEnv(t)
	const (
		page   = 50   // runs list's page
		failed = 30   // old failed runs of each DAG: the rare state
		width  = 1000 // TIs of the wide run
		events = 2000 // events of the wide run
		evPage = 100  // events page
		tiPage = 100  // a page of the wide run's TIs
	)
	// Old work first: a page of runs of the rare DAG r, failed runs of g
	// and o, then one wide run of g with its TIs and events. Every later
	// run is history (of g and o) that must not be read.
	_, err := e.raw.Exec(e.ctx, `
		INSERT INTO dags (dag_id, spec, spec_hash, max_active_tasks) VALUES ('g', '{}', 'h', 16), ('o', '{}', 'h', 16), ('r', '{}', 'h', 16);
		INSERT INTO runs (dag_id, state, max_active_tasks) SELECT 'r', 'success', 16 FROM generate_series(1, `+fmt.Sprint(page)+`);
		INSERT INTO runs (dag_id, state, max_active_tasks)
		SELECT d, 'failed', 16 FROM generate_series(1, `+fmt.Sprint(failed)+`), unnest(ARRAY['g', 'o']) d;
		INSERT INTO runs (dag_id, state, max_active_tasks) VALUES ('g', 'success', 16);
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, state, command)
		SELECT (SELECT max(id) FROM runs), 'g', 'w' || i, i, 'success', '{true}' FROM generate_series(1, `+fmt.Sprint(width)+`) i;
		INSERT INTO events (run_id, kind, message)
		SELECT (SELECT max(id) FROM runs), 'run_cancelled', 'e' || i FROM generate_series(1, `+fmt.Sprint(events)+`) i;`)
	require.NoError(t, err)
	var wide, midEvent int64
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT max(id) FROM runs`).Scan(&wide))
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT id FROM events WHERE run_id = $1 ORDER BY id OFFSET $2 LIMIT 1`,
		wide, events/2).Scan(&midEvent))

	// seed adds n successful runs alternating between the DAGs, two TIs
	// and two events each, and takes fresh statistics.
	seed := func(n int) {
		_, err := e.raw.Exec(e.ctx, `
			WITH r AS (
			  INSERT INTO runs (dag_id, state, max_active_tasks)
			  SELECT CASE WHEN i % 2 = 0 THEN 'g' ELSE 'o' END, 'success', 16 FROM generate_series(1, $1::int) i
			  RETURNING id, dag_id)
			, t AS (
			  INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, state, command)
			  SELECT r.id, r.dag_id, 't' || i, i, 'success', '{true}' FROM r CROSS JOIN generate_series(1, 2) i)
			INSERT INTO events (run_id, kind, message) SELECT r.id, 'run_cancelled', 'h' FROM r CROSS JOIN generate_series(1, 2)`, n)
		require.NoError(t, err)
		_, err = e.raw.Exec(e.ctx, `ANALYZE`)
		require.NoError(t, err)
	}

	// Each case: a statement, its arguments, and the rows of work it may
	// do, from the rows it must consider: a list considers the runs of its
	// page or, filtered by a state, every run in that state (few here: a
	// bitmap scan reads them all, then sorts), eight rows of work each
	// (index, heap, sort, limit, and the aggregate nodes of its correlated
	// TI count, once per run) and four per TI counted; a run's TIs and an
	// events page, four per row returned (a bitmap scan counts its rows
	// twice, then the sort).
	type readCase struct {
		name string
		sql  string
		args string // a literal list, for EXECUTE
		// execMode: the store sends it planned with its arguments
		// (pgx.QueryExecModeExec), never on a generic plan.
		execMode bool
		bound    float64
	}
	listBound := func(runs, tisPerRun int) float64 { return float64(8*runs + 4*runs*tisPerRun) }
	list := func(state, dag string) string { return fmt.Sprintf("('%s', '%s', %d)", state, dag, page) }
	evArgs := func(after int64) string { return fmt.Sprintf("(%d, %d, %d)", wide, after, evPage+1) }
	// after counts the wide run's task ids ("w1".."w<width>") that sort
	// after id (the test cluster's C collation: byte order).
	after := func(id string) int {
		n := 0
		for i := 1; i <= width; i++ {
			if fmt.Sprintf("w%d", i) > id {
				n++
			}
		}
		return n
	}
	midTask := fmt.Sprintf("w%d", width/2)
	cases := []readCase{
		{"runs list", store.ListRunsSQLForTest(false, false), list("", ""), true, listBound(page, 2)},
		{"runs list --dag", store.ListRunsSQLForTest(false, true), list("", "g"), true, listBound(page, 2)},
		{"runs list --dag (a DAG with no recent runs)", store.ListRunsSQLForTest(false, true), list("", "r"), true, listBound(page, 0)},
		{"runs list --state failed", store.ListRunsSQLForTest(true, false), list("failed", ""), true, listBound(2*failed, 0)},
		{"runs list --dag --state failed", store.ListRunsSQLForTest(true, true), list("failed", "g"), true, listBound(failed, 0)},
		{"runs show (the wide run's TIs)", store.RunTIsSQLForTest, fmt.Sprintf("(%d)", wide), false, float64(4 * width)},
		// A page of the wide run's TIs (the (run_id, task_id) key): the
		// first reads its own rows in order (index, heap and limit: three
		// per row). A later page may be planned as a bitmap scan of the
		// run's TIs after the cursor, sorted (four per row): bounded by the
		// rest of the run, never by the history.
		{"runs show, the first page of TIs", store.RunTIsPageSQLForTest, fmt.Sprintf("(%d, '', %d)", wide, tiPage+1), false, float64(3 * (tiPage + 1))},
		{"runs show, a middle page of TIs", store.RunTIsPageSQLForTest, fmt.Sprintf("(%d, '%s', %d)", wide, midTask, tiPage+1), false, float64(4 * (after(midTask) + 1))},
		{"runs events, first page", store.RunEventsPageSQLForTest, evArgs(0), false, float64(4 * (evPage + 1))},
		{"runs events, a middle page", store.RunEventsPageSQLForTest, evArgs(midEvent), false, float64(4 * (evPage + 1))},
		{"the grid of a DAG with no recent runs", store.GridSQLForTest, "('r', 25)", true, listBound(25, 0)},
	}
	works := map[string][]float64{}
	for _, n := range []int{5000, 50000} {
		seed(n)
		for _, c := range cases {
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				if c.execMode && mode == "force_generic_plan" {
					continue // sent planned with its arguments: no generic plan
				}
				work, scans, out := explainReads(t, e, mode, c.sql, c.args)
				t.Logf("%s, %d history runs, %s: %.0f rows of work; %v", c.name, n, mode, work, scans)
				assert.LessOrEqual(t, work, c.bound, "%s, %s, %d history runs: reads more than it returns:\n%s", c.name, mode, n, out)
				for _, s := range scans {
					assert.NotContains(t, s, "Seq Scan", "%s, %s:\n%s", c.name, mode, out)
				}
				key := c.name + "/" + mode
				works[key] = append(works[key], work)
			}
		}
	}
	for key, w := range works {
		assert.LessOrEqual(t, w[1], w[0]+probeSlack, "%s: the work grows with ten times the history", key)
	}
}

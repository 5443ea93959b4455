package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestSeedAPIHistory seeds 20 runs holding 103 TIs in chunks of 7 runs
// (so run k's place in the year, its TI count and its state must survive
// the chunk boundaries) and checks what the API's reads will see.
func TestSeedAPIHistory(t *testing.T) {
	ctx := context.Background()
	url := storetest.DB(t)
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	require.NoError(t, applySpecs(ctx, st, apiSpecs(20, 103)))
	st.Close()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var done []int
	c, err := seedAPIHistory(ctx, conn, 20, 103, 7, func(n int) { done = append(done, n) })
	require.NoError(t, err)
	require.Equal(t, []int{7, 14, 20}, done)
	// 21 run events, 1 ti_failed, and the big run's traced TIs' 3 each.
	require.Equal(t, apiSeedCounts{Runs: 21, FailedRuns: 1, TIs: 103 + bigRunWidth, Events: 21 + 1 + 3*bigRunTraced,
		BigRun: c.BigRun}, c)

	// In end order over the year: runs 1..3 hold 6 TIs, the others 5;
	// run 19 (DAG api-4) failed on its last TI; run k is DAG
	// api-(k % 5); every TI names a task of its DAG.
	rows, err := conn.Query(ctx, `
		SELECT r.dag_id, r.state, count(t.id), count(*) FILTER (WHERE t.state = 'failed'),
		       max(t.ordinal) FILTER (WHERE t.state = 'failed'),
		       count(*) FILTER (WHERE NOT EXISTS (SELECT FROM dags d, jsonb_array_elements(d.spec->'tasks') x
		                                        WHERE d.dag_id = r.dag_id AND x->>'id' = t.task_id))
		  FROM runs r JOIN task_instances t ON t.run_id = r.id
		 WHERE r.id <> $1 GROUP BY r.id ORDER BY r.end_date`, c.BigRun)
	require.NoError(t, err)
	k := 0
	var dagID, runState string
	var tis, failed, unknown int
	var failedOrdinal *int
	_, err = pgx.ForEachRow(rows, []any{&dagID, &runState, &tis, &failed, &failedOrdinal, &unknown}, func() error {
		k++
		require.Equal(t, apiDAG(k%apiDAGs), dagID, "run %d", k)
		require.Zero(t, unknown, "run %d", k)
		if k <= 3 {
			require.Equal(t, 6, tis, "run %d", k)
		} else {
			require.Equal(t, 5, tis, "run %d", k)
		}
		if k == apiFailedEvery {
			require.Equal(t, "failed", runState)
			require.Equal(t, 1, failed)
			require.Equal(t, tis-1, *failedOrdinal)
		} else {
			require.Equal(t, "success", runState, "run %d", k)
			require.Zero(t, failed, "run %d", k)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 20, k)

	// The history spans the last year and ends before the big run.
	var spanDays float64
	var bigTIs, bigEvents int
	require.NoError(t, conn.QueryRow(ctx, `
		SELECT extract(epoch FROM max(end_date) - min(end_date)) / 86400 FROM runs WHERE dag_id LIKE 'api-_'`).Scan(&spanDays))
	require.InDelta(t, 365.0*19/20, spanDays, 0.01)
	require.NoError(t, conn.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM task_instances WHERE run_id = $1 AND state = 'success' AND dag_id = $2),
		       (SELECT count(*) FROM events WHERE run_id = $1)`, c.BigRun, apiBigDAG).Scan(&bigTIs, &bigEvents))
	require.Equal(t, bigRunWidth, bigTIs)
	require.Equal(t, 3*bigRunTraced+1, bigEvents)
}

// TestAPIFailedRunsInEveryDAG: the failed runs (k % apiFailedEvery = 0)
// fall in every history DAG (k % apiDAGs), so the read filtered by DAG
// and state=failed returns a page, not an empty one.
func TestAPIFailedRunsInEveryDAG(t *testing.T) {
	seen := map[int]bool{}
	for k := apiFailedEvery; k <= apiDAGs*apiFailedEvery; k += apiFailedEvery {
		seen[k%apiDAGs] = true
	}
	require.Len(t, seen, apiDAGs)
}

package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestMetricsLiveTICounts: LiveTICounts counts queued and running TIs,
// saturates at its limit, and its plan reads the partial index of live
// TIs, not the history in task_instances.
func TestMetricsLiveTICounts(t *testing.T) {
	ctx := context.Background()
	url := storetest.DB(t)
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	db, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })

	_, err = db.Exec(ctx, `
INSERT INTO dags (dag_id, spec, spec_hash, max_active_tasks) VALUES ('d', '{}', 'h', 16);
INSERT INTO runs (id, dag_id, state, max_active_tasks) VALUES (1, 'd', 'success', 16), (2, 'd', 'running', 16);
INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, state, command)
SELECT 1, 'd', 'h' || i, i, 'success', '{true}' FROM generate_series(1, 5000) i;
INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, state, command, queued_at, next_retry_at) VALUES
 (2, 'd', 'q1', 1, 'queued', '{true}', now(), NULL),
 (2, 'd', 'q2', 2, 'queued', '{true}', now(), NULL),
 (2, 'd', 'q3', 3, 'queued', '{true}', now(), NULL),
 (2, 'd', 'r1', 4, 'running', '{true}', now(), NULL),
 (2, 'd', 'r2', 5, 'running', '{true}', now(), NULL),
 (2, 'd', 's1', 6, 'scheduled', '{true}', NULL, NULL),
 (2, 'd', 'u1', 7, 'up_for_retry', '{true}', NULL, now()),
 (2, 'd', 'n1', 8, 'none', '{true}', NULL, NULL);
ANALYZE task_instances;`)
	require.NoError(t, err)

	queued, running, err := st.LiveTICounts(ctx, 100000)
	require.NoError(t, err)
	require.Equal(t, 3, queued)
	require.Equal(t, 2, running)

	queued, running, err = st.LiveTICounts(ctx, 4)
	require.NoError(t, err)
	require.LessOrEqual(t, queued+running, 4, "the count reads at most limit live TIs")

	rows, err := db.Query(ctx, "EXPLAIN "+store.LiveTICountsSQL, 100000)
	require.NoError(t, err)
	var lines []string
	for rows.Next() {
		var l string
		require.NoError(t, rows.Scan(&l))
		lines = append(lines, l)
	}
	require.NoError(t, rows.Err())
	text := strings.Join(lines, "\n")
	require.NotContains(t, text, "Seq Scan", "the count must not scan task_instances:\n%s", text)
	require.Contains(t, text, "ti_live_idx", "the count reads the live-TI index:\n%s", text)
}

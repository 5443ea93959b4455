package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestMigration006 checks the scheduled-slot index covers scheduled runs
// only, and that the migration goes down and up again.
func TestMigration006(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.DB(t)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `INSERT INTO dags (dag_id, spec, spec_hash, max_active_tasks) VALUES ('d', '{}', 'h', 1)`)
	require.NoError(t, err)
	ins := `INSERT INTO runs (dag_id, max_active_tasks, run_type, logical_date, data_interval_start, data_interval_end)
		VALUES ('d', 1, $1, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', '2026-01-01T01:00:00Z')`
	for _, typ := range []string{"manual", "backfill", "scheduled", "manual"} {
		_, err = conn.Exec(ctx, ins, typ)
		require.NoError(t, err, typ)
	}
	_, err = conn.Exec(ctx, ins, "scheduled")
	require.ErrorContains(t, err, "runs_scheduled_slot_idx", "a second scheduled run for the slot")
	_, err = conn.Exec(ctx, ins, "other")
	require.ErrorContains(t, err, "check constraint")
	_, err = conn.Exec(ctx, `INSERT INTO runs (dag_id, max_active_tasks, run_type) VALUES ('d', 1, 'scheduled')`)
	require.ErrorContains(t, err, "runs_scheduled_slot", "a scheduled run needs its slot")

	require.NoError(t, store.MigrateToForTest(ctx, url, 5))
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
		WHERE (table_name = 'runs' AND column_name IN ('run_type', 'logical_date', 'data_interval_start', 'data_interval_end'))
		   OR (table_name = 'dags' AND column_name IN ('paused', 'next_slot', 'max_active_runs'))`).Scan(&n))
	assert.Equal(t, 0, n)
	require.NoError(t, store.MigrateToForTest(ctx, url, 6))
}

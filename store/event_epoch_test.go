package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestLeaderEventsRecordEpoch (docs/design.md §8, migration 012): an event
// written inside LeaderTx carries the epoch of the term that wrote it; an
// event written outside a leader transaction (a trigger), even afterwards
// on a connection that ran one, carries none.
func TestLeaderEventsRecordEpoch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.DB(t)
	st := openWith(t, url, store.Options{})
	spec, err := dag.Parse([]byte("dag_id: ep\ntasks:\n  - id: a\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	token, err := st.AcquireFenceIn(ctx, store.FenceDomainEtcd, 7000, "r1")
	require.NoError(t, err)

	run, err := st.TriggerRun(ctx, "ep")
	require.NoError(t, err)
	require.NoError(t, st.LeaderTx(ctx, token, func(tx store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO events (run_id, kind, message) VALUES ($1, 'probe_leader', 'x')`, run.ID)
		return err
	}))
	second, err := st.TriggerRun(ctx, "ep")
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	epochOf := func(runID int64, kind string) *int64 {
		var e *int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT epoch FROM events WHERE run_id = $1 AND kind = $2`, runID, kind).Scan(&e))
		return e
	}
	if e := epochOf(run.ID, "probe_leader"); assert.NotNil(t, e, "a leader write records its epoch") {
		assert.Equal(t, token, *e)
	}
	assert.Nil(t, epochOf(run.ID, "run_queued"), "a trigger is no leader write")
	assert.Nil(t, epochOf(second.ID, "run_queued"), "the setting ends with the leader transaction")
}

package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// BenchmarkFailedTryOutbox measures what the outbox trigger adds to a
// failed try's write (adr/0032): one statement moving a TI from running
// to failed, for a DAG whose notify list names a webhook for
// task_failed (one outbox row per write) and for one whose list is empty
// (one probe of dag_notify, no row), against the same write with the
// trigger disabled. A success never fires the trigger.
// Each iteration also moves the TI back to running, which fires nothing.
//
//	go test ./store/ -run '^$' -bench BenchmarkFailedTryOutbox -benchtime 2000x
func BenchmarkFailedTryOutbox(b *testing.B) {
	ctx := context.Background()
	url := storetest.DB(b)
	st, err := store.Open(ctx, url)
	require.NoError(b, err)
	b.Cleanup(st.Close)
	_, _, err = st.SetWebhook(ctx, "hook", "http://127.0.0.1:1/", state.WebhookJSON, nil)
	require.NoError(b, err)
	for _, y := range []string{
		"dag_id: loud\nnotify:\n  - on: [task_failed]\n    webhook: hook\ntasks:\n  - id: t\n    command: [\"true\"]\n",
		"dag_id: quiet\ntasks:\n  - id: t\n    command: [\"true\"]\n",
	} {
		spec, err := dag.Parse([]byte(y))
		require.NoError(b, err)
		_, err = st.ApplyDAG(ctx, spec)
		require.NoError(b, err)
	}
	// A session named like Vigil's own, so that the limbo trigger of
	// migration 019 stays out of the figure as it does for Vigil's writes.
	cc, err := pgx.ParseConfig(url)
	require.NoError(b, err)
	cc.RuntimeParams["application_name"] = "vigil-bench"
	conn, err := pgx.ConnectConfig(ctx, cc)
	require.NoError(b, err)
	b.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, name := range []string{"loud", "quiet", "no_trigger"} {
		dagID := name
		if name == "no_trigger" {
			// The baseline: the same write with the trigger switched off
			// (in this benchmark's own database only).
			dagID = "quiet"
			_, err := conn.Exec(ctx, `ALTER TABLE task_instances DISABLE TRIGGER ti_notify`)
			require.NoError(b, err)
		}
		b.Run(name, func(b *testing.B) {
			r, err := st.TriggerRun(ctx, dagID)
			require.NoError(b, err)
			var ti int64
			require.NoError(b, conn.QueryRow(ctx, `UPDATE task_instances SET state = 'running' WHERE run_id = $1 RETURNING id`, r.ID).Scan(&ti))
			b.ResetTimer()
			for b.Loop() {
				if _, err := conn.Exec(ctx, `UPDATE task_instances SET state = 'failed', reason = 'exit_code' WHERE id = $1`, ti); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if _, err := conn.Exec(ctx, `UPDATE task_instances SET state = 'running' WHERE id = $1`, ti); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// Retention removes only old terminal runs (with their TIs, events and
// logs) and long-silent inactive agents; a run that is not terminal is
// never touched, however old.
func TestRetentionPrunesOnlyOldTerminalRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, st := newScheduler(t, Config{Retention: Retention{Runs: 24 * time.Hour, Agents: 24 * time.Hour, Audit: 24 * time.Hour, Batch: 1}})
	raw, err := pgxpool.New(ctx, st.URL())
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, st.AcquireFence(ctx, 1, "t"))
	spec, err := dag.Parse([]byte("dag_id: d\ntasks:\n  - id: a\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	ids := map[string]int64{}
	for _, name := range []string{"old-success", "old-failed", "recent-success", "old-running"} {
		run, err := st.TriggerRun(ctx, "d")
		require.NoError(t, err)
		ids[name] = run.ID
	}
	exec := func(sql string, args ...any) {
		_, err := raw.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec(`UPDATE runs SET state = 'success', end_date = now() - interval '3 days' WHERE id = $1`, ids["old-success"])
	exec(`UPDATE runs SET state = 'failed', end_date = now() - interval '3 days' WHERE id = $1`, ids["old-failed"])
	exec(`UPDATE runs SET state = 'success', end_date = now() - interval '1 hour' WHERE id = $1`, ids["recent-success"])
	exec(`UPDATE runs SET state = 'running', start_date = now() - interval '90 days', end_date = now() - interval '90 days' WHERE id = $1`, ids["old-running"])
	for _, name := range []string{"gone", "quiet-but-active", "recent-inactive"} {
		storetest.Agent(t, st, store.Registration{Name: name, Capacity: 1})
	}
	exec(`UPDATE agents SET state = 'inactive', last_heartbeat_at = now() - interval '3 days' WHERE name = 'gone'`)
	exec(`UPDATE agents SET last_heartbeat_at = now() - interval '3 days' WHERE name = 'quiet-but-active'`)
	exec(`UPDATE agents SET state = 'inactive' WHERE name = 'recent-inactive'`)

	for _, who := range []string{"old-1", "old-2", "recent"} {
		require.NoError(t, st.AppendAudit(ctx, &store.AuditRecord{Actor: who, Route: "POST /v1/reap", Result: store.AuditOK}))
	}
	exec(`UPDATE audit_log SET at = now() - interval '3 days' WHERE actor LIKE 'old-%'`)

	runs, agents, err := s.retention.runOnce(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, 2, runs, "batches of 1 continue until done")
	assert.Equal(t, 1, agents)
	for name, id := range ids {
		_, err := st.GetRun(ctx, id)
		if name == "old-success" || name == "old-failed" {
			assert.ErrorIs(t, err, store.ErrNotFound, name)
		} else {
			assert.NoError(t, err, name)
		}
	}
	var tis int
	require.NoError(t, raw.QueryRow(ctx, `SELECT count(*) FROM task_instances WHERE run_id = ANY ($1)`,
		[]int64{ids["old-success"], ids["old-failed"]}).Scan(&tis))
	assert.Zero(t, tis, "their TIs and logs went with them")
	var events, kept int
	require.NoError(t, raw.QueryRow(ctx, `SELECT count(*) FILTER (WHERE run_id = ANY ($1)), count(*) FROM events`,
		[]int64{ids["old-success"], ids["old-failed"]}).Scan(&events, &kept))
	assert.Zero(t, events, "their events went in the same statement (events have no foreign key, adr/0022)")
	assert.Positive(t, kept, "the other runs' events stay")
	list, err := st.ListAgents(ctx, 0, 1000)
	require.NoError(t, err)
	assert.Len(t, list, 2)
	assert.Equal(t, 3.0, testutil.ToFloat64(s.cfg.Metrics.Decisions.WithLabelValues("retention_pruned")))
	audit, err := st.ListAudit(ctx, store.AuditFilter{Limit: 10})
	require.NoError(t, err)
	require.Len(t, audit.Records, 1, "old audit rows are pruned in batches until none is left")
	assert.Equal(t, "recent", audit.Records[0].Actor)

	// Disabled categories are left alone; a fenced-out epoch prunes nothing.
	off, _ := newScheduler(t, Config{})
	r, a, err := off.retention.runOnce(ctx, 1)
	require.NoError(t, err)
	assert.Zero(t, r+a)
	_, _, err = s.retention.runOnce(ctx, 99)
	assert.True(t, store.IsFenced(err))
}

// Zero fields take the package defaults; every bound names its flag.
func TestRetentionDefaultsAndBounds(t *testing.T) {
	t.Parallel()
	r := Retention{Runs: DefaultRetentionRuns}
	require.NoError(t, r.Validate())
	assert.Equal(t, Retention{Runs: DefaultRetentionRuns, Interval: DefaultRetentionInterval, Batch: defaultRetentionBatch}, r)
	for _, c := range []struct {
		r    Retention
		want string
	}{
		{Retention{Runs: -time.Hour}, "retention-runs: -1h0m0s must not be negative"},
		{Retention{Agents: time.Minute}, "retention-agents: 1m0s is below the 1h minimum"},
		{Retention{Audit: time.Minute}, "retention-audit: 1m0s is below the 1h minimum"},
		{Retention{Interval: time.Second}, "retention-interval: 1s must be between 1m and 24h"},
		{Retention{Batch: -1}, "retention batch: -1 must be between 1 and 100000"},
		{Retention{Notifications: time.Minute}, "retention-notifications: 1m0s must be 0 (disables) or at least 1h"},
	} {
		assert.ErrorContains(t, c.r.Validate(), c.want)
	}
	off, _ := newScheduler(t, Config{})
	assert.False(t, off.retention.enabled(), "zero ages: no retention service")
}

// Retention prunes delivered and dead notifications that finished before
// the age, batch after batch, and never a pending one, however old.
func TestRetentionPrunesFinishedNotifications(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, st := newScheduler(t, Config{Retention: Retention{Notifications: 24 * time.Hour, Batch: 1}})
	raw, err := pgxpool.New(ctx, st.URL())
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, st.AcquireFence(ctx, 1, "t"))
	_, _, err = st.SetWebhook(ctx, "w", "http://127.0.0.1:1/", state.WebhookJSON, nil)
	require.NoError(t, err)
	spec, err := dag.Parse([]byte("dag_id: d\nnotify:\n  - on: [run_failed]\n    webhook: w\ntasks:\n  - id: a\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	for range 4 {
		run, err := st.TriggerRun(ctx, "d")
		require.NoError(t, err)
		_, err = st.CancelRun(ctx, run.ID, state.ReasonCancelled, "x")
		require.NoError(t, err)
	}
	_, err = raw.Exec(ctx, `
		WITH n AS (SELECT id, row_number() OVER (ORDER BY id) AS i FROM notifications)
		UPDATE notifications SET created_at = now() - interval '4 days',
		       state = CASE n.i WHEN 1 THEN 'delivered' WHEN 2 THEN 'dead' WHEN 3 THEN 'delivered' ELSE 'pending' END,
		       finished_at = CASE n.i WHEN 1 THEN now() - interval '3 days' WHEN 2 THEN now() - interval '3 days'
		                              WHEN 3 THEN now() - interval '1 hour' END
		  FROM n WHERE notifications.id = n.id`)
	require.NoError(t, err)
	_, _, err = s.retention.runOnce(ctx, 1)
	require.NoError(t, err)
	left, err := st.ListNotifications(ctx, store.NotificationFilter{Limit: 10})
	require.NoError(t, err)
	var states []state.Delivery
	for _, n := range left {
		states = append(states, n.State)
	}
	assert.Equal(t, []state.Delivery{state.DeliveryPending, state.DeliveryDelivered}, states,
		"the recent delivered and the old pending one stay")
}

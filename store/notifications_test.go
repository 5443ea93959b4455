package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// notifyEnv is a store with a fence at epoch 1, an agent and a webhook
// "hook" every DAG of apply notifies of every event.
type notifyEnv struct {
	t     *testing.T
	ctx   context.Context
	st    *store.Store
	url   string
	agent int64
	db    *pgx.Conn // for what no store method does: moving the clock's marks
}

func newNotifyEnv(t *testing.T) *notifyEnv {
	t.Helper()
	ctx := context.Background()
	url := storetest.DB(t)
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.AcquireFence(ctx, 1, "test"))
	_, _, err = st.SetWebhook(ctx, "hook", "http://127.0.0.1:1/x", state.WebhookJSON, nil)
	require.NoError(t, err)
	db, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	return &notifyEnv{t: t, ctx: ctx, st: st, url: url, db: db, agent: storetest.Agent(t, st, store.Registration{Name: "w", Capacity: 10})}
}

// apply applies a one-task DAG notifying hook of every event.
func (e *notifyEnv) apply(dagID string, retries int, extra string) {
	e.t.Helper()
	spec, err := dag.Parse(fmt.Appendf(nil, "dag_id: %s\n%snotify:\n  - on: [run_failed, run_succeeded, task_failed, task_retried, sla_missed]\n"+
		"    webhook: hook\ntasks:\n  - id: t\n    retries: %d\n    retry_delay: 1h\n    command: [\"true\"]\n", dagID, extra, retries))
	require.NoError(e.t, err)
	_, err = e.st.ApplyDAG(e.ctx, spec)
	require.NoError(e.t, err)
}

func (e *notifyEnv) drain() {
	e.t.Helper()
	for {
		res, err := e.st.ScheduleDirty(e.ctx, 1, 100)
		require.NoError(e.t, err)
		if res.Runs == 0 {
			return
		}
	}
}

// claim triggers a run of dagID and claims its TI with a started heartbeat.
func (e *notifyEnv) claim(dagID string) (store.Run, store.Attempt) {
	e.t.Helper()
	r, err := e.st.TriggerRun(e.ctx, dagID)
	require.NoError(e.t, err)
	e.drain()
	tasks, err := e.st.Claim(e.ctx, e.agent, 1)
	require.NoError(e.t, err)
	require.Len(e.t, tasks, 1)
	_, _, err = e.st.Heartbeat(e.ctx, e.agent, []store.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}})
	require.NoError(e.t, err)
	return r, tasks[0].Attempt
}

func (e *notifyEnv) list(runID int64) []store.Notification {
	e.t.Helper()
	ns, err := e.st.ListNotifications(e.ctx, store.NotificationFilter{RunID: runID, Limit: 100})
	require.NoError(e.t, err)
	return ns
}

// events lists "event task try state reason" of a run's notifications,
// oldest first.
func events(ns []store.Notification) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[len(ns)-1-i] = fmt.Sprintf("%s %s %d %s %s", n.Event, n.TaskID, n.TryNumber, n.SubjectState, n.Reason)
	}
	return out
}

// TestOutboxRowsFollowStateChanges: a failed try with a retry left
// raises task_failed and task_retried, the last failed try task_failed,
// and the run's end run_failed; a successful run run_succeeded, and an
// operator's mark failed of its TI task_failed and run_failed; a cancel
// run_failed with state cancelled. Each row is pending, due, and carries
// the reason and message the state change wrote.
func TestOutboxRowsFollowStateChanges(t *testing.T) {
	t.Parallel()
	e := newNotifyEnv(t)
	e.apply("flaky", 1, "")
	code := 2
	r, att := e.claim("flaky")
	_, _, err := e.st.Complete(e.ctx, e.agent, store.Completion{Attempt: att, Outcome: state.OutcomeFailed, ExitCode: &code})
	require.NoError(t, err)
	// The retry is due in an hour: make it due now, as the clock would.
	_, err = e.db.Exec(e.ctx, `UPDATE task_instances SET next_retry_at = now() WHERE run_id = $1`, r.ID)
	require.NoError(t, err)
	e.drain()
	tasks, err := e.st.Claim(e.ctx, e.agent, 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	_, _, err = e.st.Complete(e.ctx, e.agent, store.Completion{Attempt: tasks[0].Attempt, Outcome: state.OutcomeFailed, ExitCode: &code})
	require.NoError(t, err)
	e.drain()
	ns := e.list(r.ID)
	assert.Equal(t, []string{
		"task_failed t 1 up_for_retry exit_code", "task_retried t 1 up_for_retry exit_code",
		"task_failed t 2 failed exit_code", "run_failed  0 failed exit_code",
	}, events(ns))
	for _, n := range ns {
		assert.Equal(t, state.DeliveryPending, n.State)
		assert.Equal(t, "hook", n.Webhook)
		assert.NotEmpty(t, n.DeliveryID)
		assert.NotEmpty(t, n.Message, "the message the state change wrote")
	}

	e.apply("ok", 0, "")
	r, att = e.claim("ok")
	_, _, err = e.st.Complete(e.ctx, e.agent, store.Completion{Attempt: att, Outcome: state.OutcomeSuccess})
	require.NoError(t, err)
	e.drain()
	assert.Equal(t, []string{"run_succeeded  0 success "}, events(e.list(r.ID)))
	// An operator's mark failed is a failed try (reason marked), and the
	// run it reopens ends failed again.
	_, err = e.st.MarkTI(e.ctx, store.MarkRequest{RunID: r.ID, TaskID: "t", To: state.TIFailed, Actor: "op"})
	require.NoError(t, err)
	e.drain()
	assert.Equal(t, []string{"run_succeeded  0 success ", "task_failed t 1 failed marked", "run_failed  0 failed marked"}, events(e.list(r.ID)))

	r, _ = e.claim("ok")
	_, err = e.st.CancelRun(e.ctx, r.ID, state.ReasonCancelled, "cancelled by test")
	require.NoError(t, err)
	assert.Equal(t, []string{"run_failed  0 cancelled cancelled"}, events(e.list(r.ID)),
		"a cancel is run_failed with state cancelled; a cancelled TI is not a failed try")
}

// TestOutboxRowCommitsWithItsStateChange: the outbox row exists exactly
// when the state change that raised it committed. Inside the writer's
// transaction the row is there; another session sees neither the change
// nor the row until the commit; a rolled-back change leaves no row. A
// state change written outside Vigil (psql) raises it too.
func TestOutboxRowCommitsWithItsStateChange(t *testing.T) {
	t.Parallel()
	e := newNotifyEnv(t)
	e.apply("tx", 0, "")
	r, _ := e.claim("tx")
	conn, err := pgx.Connect(e.ctx, e.url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	count := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}) int {
		var n int
		require.NoError(t, q.QueryRow(e.ctx, `SELECT count(*) FROM notifications WHERE run_id = $1 AND event = 'task_failed'`, r.ID).Scan(&n))
		return n
	}
	fail := func(tx pgx.Tx) {
		_, err := tx.Exec(e.ctx, `UPDATE task_instances SET state = 'failed', reason = 'exit_code', message = 'by hand' WHERE run_id = $1`, r.ID)
		require.NoError(t, err)
	}
	tx, err := conn.Begin(e.ctx)
	require.NoError(t, err)
	fail(tx)
	assert.Equal(t, 1, count(tx), "the writer's transaction holds the row")
	assert.Equal(t, 0, count(e.db), "nobody else sees it before the commit")
	require.NoError(t, tx.Rollback(e.ctx))
	assert.Equal(t, 0, count(e.db), "a rolled-back change raises nothing")

	tx, err = conn.Begin(e.ctx)
	require.NoError(t, err)
	fail(tx)
	require.NoError(t, tx.Commit(e.ctx))
	assert.Equal(t, 1, count(e.db), "the committed change has its row")
}

// TestApplyRefusesUnknownWebhook: apply names the DAG, the field and the
// value; a webhook a DAG names cannot be deleted; deleting one dead-letters
// its pending deliveries.
func TestApplyRefusesUnknownWebhook(t *testing.T) {
	t.Parallel()
	e := newNotifyEnv(t)
	spec, err := dag.Parse([]byte("dag_id: d\nnotify:\n  - on: [run_failed]\n    webhook: hook\n  - on: [sla_missed]\n    webhook: nope\n" +
		"tasks:\n  - id: t\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = e.st.ApplyDAG(e.ctx, spec)
	require.Error(t, err)
	assert.True(t, store.IsMissingWebhooks(err))
	assert.Contains(t, err.Error(), `dag "d": notify[1].webhook: no such webhook "nope" (create it with `+"`vigil webhooks set nope --url URL`)")
	_, _, err = e.st.GetDAG(e.ctx, "d")
	assert.ErrorIs(t, err, store.ErrNotFound, "nothing of the refused DAG was stored")

	e.apply("uses", 0, "")
	err = e.st.DeleteWebhook(e.ctx, "hook")
	require.Error(t, err)
	assert.True(t, store.IsWebhookInUse(err))
	assert.Contains(t, err.Error(), "webhook hook: the notify list of dag uses names it")

	// Re-applying without notify frees the webhook; its pending rows die
	// with it.
	r, _ := e.claim("uses")
	_, err = e.st.CancelRun(e.ctx, r.ID, state.ReasonCancelled, "x")
	require.NoError(t, err)
	spec, err = dag.Parse([]byte("dag_id: uses\ntasks:\n  - id: t\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = e.st.ApplyDAG(e.ctx, spec)
	require.NoError(t, err)
	require.NoError(t, e.st.DeleteWebhook(e.ctx, "hook"))
	ns := e.list(r.ID)
	require.Len(t, ns, 1)
	assert.Equal(t, state.DeliveryDead, ns[0].State)
	assert.Equal(t, "webhook deleted", ns[0].LastError)
	assert.ErrorIs(t, e.st.DeleteWebhook(e.ctx, "hook"), store.ErrNotFound)
}

// TestRecordDeliveries: delivered is terminal; a failure waits its
// back-off, never past the max age; a failure at the max age is dead; a
// deposed epoch records nothing.
func TestRecordDeliveries(t *testing.T) {
	t.Parallel()
	e := newNotifyEnv(t)
	e.apply("rec", 0, "")
	var ids []int64
	for range 3 {
		r, _ := e.claim("rec")
		_, err := e.st.CancelRun(e.ctx, r.ID, state.ReasonCancelled, "x")
		require.NoError(t, err)
		ids = append(ids, e.list(r.ID)[0].ID)
	}
	due, err := e.st.DueNotifications(e.ctx, 10)
	require.NoError(t, err)
	require.Len(t, due, 3)
	assert.Equal(t, ids, []int64{due[0].ID, due[1].ID, due[2].ID}, "oldest first")

	dead, err := e.st.RecordDeliveries(e.ctx, 1, time.Hour, []store.DeliveryResult{
		{ID: ids[0], Delivered: true, Status: 204},
		{ID: ids[1], Status: 503, Error: "HTTP 503", Retry: time.Minute},
	})
	require.NoError(t, err)
	assert.Zero(t, dead)
	due, err = e.st.DueNotifications(e.ctx, 10)
	require.NoError(t, err)
	require.Len(t, due, 1, "the delivered one is done, the failed one waits its minute")
	assert.Equal(t, ids[2], due[0].ID)

	_, err = e.st.RecordDeliveries(e.ctx, 0, time.Hour, []store.DeliveryResult{{ID: ids[2], Delivered: true}})
	assert.True(t, store.IsFenced(err), "a deposed epoch records nothing: %v", err)

	// A max age already past: the failure is the last attempt.
	dead, err = e.st.RecordDeliveries(e.ctx, 1, time.Nanosecond, []store.DeliveryResult{
		{ID: ids[2], Error: "dial tcp: connection refused", Retry: time.Minute}})
	require.NoError(t, err)
	assert.Equal(t, 1, dead)
	all, err := e.st.ListNotifications(e.ctx, store.NotificationFilter{Limit: 10})
	require.NoError(t, err)
	byID := map[int64]store.Notification{}
	for _, n := range all {
		byID[n.ID] = n
	}
	assert.Equal(t, state.DeliveryDelivered, byID[ids[0]].State)
	assert.Equal(t, 204, byID[ids[0]].LastStatus)
	assert.Equal(t, state.DeliveryPending, byID[ids[1]].State)
	assert.Equal(t, 1, byID[ids[1]].Attempts)
	assert.Equal(t, "HTTP 503", byID[ids[1]].LastError)
	assert.Equal(t, state.DeliveryDead, byID[ids[2]].State)
	assert.NotNil(t, byID[ids[2]].FinishedAt)
	age, ok, err := e.st.OldestPendingAge(e.ctx)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.GreaterOrEqual(t, age, time.Duration(0))

	n, err := e.st.PruneNotifications(e.ctx, 1, 0, 100)
	require.NoError(t, err)
	assert.Equal(t, 2, n, "the delivered and the dead one; the pending one stays")
}

// TestMissSLAs: a live run past its deadline misses it once, with an
// event and a notification; a finished run and a run not yet due do not.
func TestMissSLAs(t *testing.T) {
	t.Parallel()
	e := newNotifyEnv(t)
	e.apply("sla", 0, "sla: 1h\n")
	late, _ := e.claim("sla")
	early, _ := e.claim("sla")
	done, _ := e.claim("sla")
	_, err := e.st.CancelRun(e.ctx, done.ID, state.ReasonCancelled, "x")
	require.NoError(t, err)
	var slaAfter time.Duration
	require.NoError(t, e.db.QueryRow(e.ctx, `SELECT sla_at - queued_at FROM runs WHERE id = $1`, early.ID).Scan(&slaAfter))
	assert.Equal(t, time.Hour, slaAfter, "a manual run's deadline is its sla after it was queued")
	_, err = e.db.Exec(e.ctx, `UPDATE runs SET sla_at = now() - interval '1 second' WHERE id = ANY ($1)`, []int64{late.ID, done.ID})
	require.NoError(t, err)

	miss, err := e.st.MissSLAs(e.ctx, 1, 10)
	require.NoError(t, err)
	require.Len(t, miss, 1)
	assert.Equal(t, late.ID, miss[0].RunID)
	again, err := e.st.MissSLAs(e.ctx, 1, 10)
	require.NoError(t, err)
	assert.Empty(t, again, "raised once")
	assert.Equal(t, []string{"sla_missed  0 running "}, events(e.list(late.ID)))
	evs, err := e.st.RunEvents(e.ctx, late.ID, 0)
	require.NoError(t, err)
	var kinds []state.EventKind
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind)
	}
	assert.Contains(t, kinds, state.EventSLAMissed)
	assert.Empty(t, e.list(early.ID))
}

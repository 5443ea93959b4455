package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
)

// The notification outbox (docs/notifications.md, adr/0032): the rows are
// written by the database triggers of migration 024 (and by MissSLAs) in
// the transaction of the state change that raises them; the leader's
// delivery service reads the due ones, posts them outside any
// transaction, and records each result under its fence. A leader that
// dies between a post and its record leaves the row pending, and the
// next leader posts it again under the same delivery id: at least once.

// ChanNotify wakes the delivery service: the outbox triggers send it
// with every row they write.
const ChanNotify = "vigil_notify"

// Notification is one outbox row: an event of a run or TI for one
// webhook, and how its delivery went. Times are the database clock's.
type Notification struct {
	ID         int64
	DeliveryID string
	Event      state.NotifyEvent
	Webhook    string
	DAGID      string
	RunID      int64
	TIID       int64  // 0 for a run's event
	TaskID     string // "" for a run's event
	TryNumber  int
	// SubjectState is the TI's or run's state the event reports
	// (failed, up_for_retry, success, cancelled…; running for sla_missed).
	SubjectState string
	Reason       string
	Message      string
	CreatedAt    time.Time
	State        state.Delivery
	Attempts     int
	// NextAttemptAt is when a pending delivery is tried next.
	NextAttemptAt time.Time
	LastAttemptAt *time.Time
	LastStatus    int // the receiver's last HTTP status; 0 when none answered
	LastError     string
	FinishedAt    *time.Time
}

const notificationColumns = `id, delivery_id::text, event, webhook, dag_id, run_id, coalesce(ti_id, 0), coalesce(task_id, ''),
	coalesce(try_number, 0), subject_state, coalesce(reason, ''), coalesce(message, ''), created_at, state, attempts,
	next_attempt_at, last_attempt_at, coalesce(last_status, 0), coalesce(last_error, ''), finished_at`

func scanNotification(r pgx.CollectableRow) (Notification, error) {
	var n Notification
	err := r.Scan(&n.ID, &n.DeliveryID, &n.Event, &n.Webhook, &n.DAGID, &n.RunID, &n.TIID, &n.TaskID, &n.TryNumber,
		&n.SubjectState, &n.Reason, &n.Message, &n.CreatedAt, &n.State, &n.Attempts, &n.NextAttemptAt,
		&n.LastAttemptAt, &n.LastStatus, &n.LastError, &n.FinishedAt)
	return n, err
}

// DueNotifications returns up to limit pending notifications whose next
// attempt is due by the database clock, oldest due first (then by id, so
// a run's task_failed goes before its run_failed), read through
// notifications_due_idx.
func (s *Store) DueNotifications(ctx context.Context, limit int) ([]Notification, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+notificationColumns+` FROM notifications
		 WHERE state = 'pending' AND next_attempt_at <= now() ORDER BY next_attempt_at, id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("due notifications: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanNotification)
	if err != nil {
		return nil, fmt.Errorf("due notifications: %w", err)
	}
	if f := s.signals.NotificationsDue; f != nil && len(out) > 0 {
		if err := f(ctx, len(out)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DeliveryResult is one delivery attempt's outcome, for RecordDeliveries.
type DeliveryResult struct {
	ID        int64
	Delivered bool
	Status    int    // the receiver's HTTP status; 0 when none answered
	Error     string // why it failed, bounded and free of secrets; "" when delivered
	// Retry is the back-off before the next attempt of a failed one.
	Retry time.Duration
}

// RecordDeliveries records attempts under epoch in one fenced statement:
// a delivered one becomes delivered; a failed one counts the attempt and
// waits its Retry, but never past created_at + maxAge, and once an
// attempt fails at or after that age it becomes dead. Only rows still
// pending change (a row a concurrent delete dead-lettered stays dead). It
// returns how many became dead.
func (s *Store) RecordDeliveries(ctx context.Context, epoch int64, maxAge time.Duration, results []DeliveryResult) (dead int, err error) {
	if len(results) == 0 {
		return 0, nil
	}
	ids := make([]int64, len(results))
	ok := make([]bool, len(results))
	status := make([]int32, len(results))
	errs := make([]string, len(results))
	retry := make([]int64, len(results))
	for i, r := range results {
		ids[i], ok[i], status[i], errs[i], retry[i] = r.ID, r.Delivered, int32(r.Status), r.Error, micros(r.Retry)
	}
	err = s.LeaderTx(ctx, epoch, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `
			WITH r AS (SELECT * FROM unnest($1::bigint[], $2::bool[], $3::int[], $4::text[], $5::bigint[])
			                       AS r (id, ok, status, err, retry_us)),
			upd AS (
			  UPDATE notifications n
			     SET attempts = n.attempts + 1, last_attempt_at = now(), last_status = nullif(r.status, 0),
			         last_error = nullif(r.err, ''),
			         state = CASE WHEN r.ok THEN 'delivered'
			                      WHEN now() >= n.created_at + $6 * interval '1 microsecond' THEN 'dead'
			                      ELSE 'pending' END,
			         finished_at = CASE WHEN r.ok OR now() >= n.created_at + $6 * interval '1 microsecond' THEN now() END,
			         next_attempt_at = least(now() + r.retry_us * interval '1 microsecond',
			                                 n.created_at + $6 * interval '1 microsecond')
			    FROM r
			   WHERE n.id = r.id AND n.state = 'pending'
			  RETURNING n.state)
			SELECT count(*) FILTER (WHERE state = 'dead') FROM upd`, ids, ok, status, errs, retry, micros(maxAge)).Scan(&dead)
	})
	if err != nil {
		return 0, fmt.Errorf("record deliveries: %w", err)
	}
	return dead, nil
}

// OldestPendingAge is the age, by the database clock, of the oldest
// pending notification (read through notifications_pending_idx), and
// false when none is pending.
func (s *Store) OldestPendingAge(ctx context.Context) (time.Duration, bool, error) {
	var us *int64
	err := s.pool.QueryRow(ctx, `
		SELECT (extract(epoch FROM now() - min(created_at)) * 1e6)::bigint FROM notifications WHERE state = 'pending'`).Scan(&us)
	if err != nil {
		return 0, false, fmt.Errorf("oldest pending notification: %w", err)
	}
	if us == nil {
		return 0, false, nil
	}
	return max(fromMicros(*us), 0), true, nil
}

// NotificationFilter selects notifications for ListNotifications.
type NotificationFilter struct {
	State state.Delivery // "" for every state
	RunID int64          // 0 for every run
	Limit int            // rows, newest first; 1..1000
}

// ListNotifications returns notifications newest first, by filter.
func (s *Store) ListNotifications(ctx context.Context, f NotificationFilter) ([]Notification, error) {
	if f.Limit < 1 || f.Limit > 1000 {
		return nil, fmt.Errorf("list notifications: limit %d must be between 1 and 1000", f.Limit)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+notificationColumns+` FROM notifications
		 WHERE ($1 = '' OR state = $1) AND ($2 = 0 OR run_id = $2) ORDER BY id DESC LIMIT $3`,
		string(f.State), f.RunID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list notifications: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanNotification)
	if err != nil {
		return nil, fmt.Errorf("list notifications: %w", err)
	}
	return out, nil
}

// PruneNotifications deletes up to batch delivered or dead notifications
// that finished before now − olderThan, and reports how many went.
func (s *Store) PruneNotifications(ctx context.Context, epoch int64, olderThan time.Duration, batch int) (int, error) {
	return s.leaderExec(ctx, epoch, "prune notifications", `
		DELETE FROM notifications WHERE id IN (
		  SELECT id FROM notifications
		   WHERE state IN ('delivered', 'dead') AND finished_at < now() - $1 * interval '1 microsecond'
		   ORDER BY finished_at LIMIT $2)`, micros(olderThan), batch)
}

// SLAMiss is one run MissSLAs found past its SLA deadline.
type SLAMiss struct {
	RunID int64
	DAGID string
	SLAAt time.Time
}

// MissSLAs finds up to batch live runs past their SLA deadline (sla_at,
// by the database clock, through runs_sla_idx) that have not missed it
// yet, and in one fenced statement stamps sla_missed_at, appends an
// sla_missed event to each run's timeline and raises the sla_missed
// notifications. A run another transaction holds is skipped for the next
// pass; a stamped run never raises it again.
func (s *Store) MissSLAs(ctx context.Context, epoch int64, batch int) ([]SLAMiss, error) {
	var out []SLAMiss
	err := s.LeaderTx(ctx, epoch, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			WITH due AS (
			  SELECT id FROM runs
			   WHERE sla_at <= now() AND sla_missed_at IS NULL AND state IN `+runLiveSQL+`
			   ORDER BY sla_at LIMIT $1
			     FOR NO KEY UPDATE SKIP LOCKED),
			upd AS (
			  UPDATE runs r SET sla_missed_at = now() FROM due
			   WHERE r.id = due.id AND r.sla_missed_at IS NULL AND r.state IN `+runLiveSQL+`
			  RETURNING r.id, r.dag_id, r.state, r.sla_at,
			            format('run %s of %s not finished by its SLA deadline %s', r.id, r.dag_id,
			                   to_char(r.sla_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')) AS msg),
			ev AS (
			  INSERT INTO events (run_id, kind, message)
			  SELECT id, '`+string(state.EventSLAMissed)+`', msg FROM upd)
			SELECT id, dag_id, sla_at,
			       vigil_enqueue_notifications(ARRAY['`+string(state.NotifySLAMissed)+`'], dag_id, id, NULL, NULL, NULL,
			                                   state, NULL, msg)
			  FROM upd ORDER BY id`, batch)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (SLAMiss, error) {
			var m SLAMiss
			var rows int
			err := r.Scan(&m.RunID, &m.DAGID, &m.SLAAt, &rows)
			return m, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sla misses: %w", err)
	}
	return out, nil
}

// IsWebhookInUse reports whether err is (or wraps) a *WebhookInUseError.
func IsWebhookInUse(err error) bool {
	var e *WebhookInUseError
	return errors.As(err, &e)
}

// slaAtSQL is a new run's SLA deadline in createRunTx's INSERT ($4 the
// run type, $7 the data interval's end, $9 the DAG's sla in
// microseconds, NULL for none): a scheduled run's is the end of its data
// interval plus the sla, a manual run's its queued time (now) plus the
// sla. A backfill run has none: its slot's interval ended long ago by
// design.
const slaAtSQL = `CASE WHEN $9::bigint IS NULL THEN NULL
		       WHEN $4 = 'scheduled' THEN $7::timestamptz + $9 * interval '1 microsecond'
		       WHEN $4 = 'manual' THEN now() + $9 * interval '1 microsecond' END`

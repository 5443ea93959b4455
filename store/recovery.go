package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
)

// The Strøm-derived sweeps (docs/design.md §7): execution-timeout backstop, run
// timeout and stale agents. Same shape as reap.go: list by a positive
// signal, act with one guarded, fenced statement.

// OverdueRunning is an execution-timeout backstop candidate: a running TI
// past started_at + execution_timeout + grace, which its agent should have
// killed already.
type OverdueRunning struct {
	StaleRunning
	StartedAt        time.Time
	ExecutionTimeout time.Duration
}

// ListOverdueRunning lists up to limit running TIs whose started_at +
// execution_timeout + grace is before now, through ti_timeout_idx on
// timeout_at (= started_at + execution_timeout, set at the start).
func (s *Store) ListOverdueRunning(ctx context.Context, now time.Time, grace time.Duration, limit int) ([]OverdueRunning, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, run_id, task_id, try_number, attempt_id::text, agent_id, last_heartbeat_at,
		       dispatch_attempts, retries + retry_base,
		       (extract(epoch FROM retry_delay) * 1e6)::bigint, retry_exponential,
		       (extract(epoch FROM max_retry_delay) * 1e6)::bigint,
		       (extract(epoch FROM $1::timestamptz - started_at) * 1e6)::bigint,
		       started_at, (extract(epoch FROM execution_timeout) * 1e6)::bigint
		  FROM task_instances
		 WHERE state = 'running' AND timeout_at < $1::timestamptz - $2 * interval '1 microsecond'
		   AND started_at IS NOT NULL AND attempt_id IS NOT NULL
		 ORDER BY timeout_at LIMIT $3`, now, micros(grace), limit)
	if err != nil {
		return nil, fmt.Errorf("list overdue running: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (OverdueRunning, error) {
		var c OverdueRunning
		var delay, maxDelay, age, timeout int64
		var hb *time.Time
		err := r.Scan(&c.TIID, &c.RunID, &c.TaskID, &c.TryNumber, &c.AttemptID, &c.AgentID, &hb,
			&c.DispatchAttempts, &c.Policy.Retries, &delay, &c.Policy.Exponential, &maxDelay, &age,
			&c.StartedAt, &timeout)
		if hb != nil {
			c.LastHeartbeatAt = *hb
		}
		c.Started = true
		c.Policy.Delay, c.Policy.MaxDelay, c.Age = fromMicros(delay), fromMicros(maxDelay), fromMicros(age)
		c.ExecutionTimeout = fromMicros(timeout)
		return c, err
	})
}

// TimedOutRun is a run past its timeout, counted from its start (or from
// when it was queued, if it never started).
type TimedOutRun struct {
	RunID    int64
	DAGID    string
	State    state.Run // queued or running
	Since    time.Time
	Timeout  time.Duration
	Deadline time.Time
	Overdue  time.Duration
}

// ListTimedOutRuns lists up to limit queued or running runs whose timeout
// deadline (runs.deadline_at, indexed) is before now.
func (s *Store) ListTimedOutRuns(ctx context.Context, now time.Time, limit int) ([]TimedOutRun, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT r.id, r.dag_id, r.state, coalesce(r.start_date, r.queued_at),
		       (extract(epoch FROM r.timeout) * 1e6)::bigint, r.deadline_at,
		       (extract(epoch FROM $1::timestamptz - r.deadline_at) * 1e6)::bigint
		  FROM runs r
		 WHERE r.state IN `+runLiveSQL+` AND r.deadline_at < $1::timestamptz
		 ORDER BY r.deadline_at LIMIT $2`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("list timed-out runs: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TimedOutRun, error) {
		var c TimedOutRun
		var timeout, overdue int64
		err := r.Scan(&c.RunID, &c.DAGID, &c.State, &c.Since, &timeout, &c.Deadline, &overdue)
		c.Timeout, c.Overdue = fromMicros(timeout), fromMicros(overdue)
		return c, err
	})
}

// TimeoutRun cancels a run with reason run_timeout, fenced, re-checking
// that it is still queued or running and past its deadline at now. Its
// agents are told to stop at their next heartbeat. It reports false when
// the run ended first.
func (s *Store) TimeoutRun(ctx context.Context, epoch int64, c TimedOutRun, now time.Time, message string) (bool, error) {
	done := false
	err := s.LeaderTx(ctx, epoch, func(tx Tx) error {
		var ok bool
		err := tx.QueryRow(ctx, `
			SELECT true FROM runs r
			 WHERE r.id = $1 AND r.state IN `+runLiveSQL+` AND r.deadline_at < $2::timestamptz
			   FOR NO KEY UPDATE`, c.RunID, now).Scan(&ok)
		if errNoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		done = true
		return cancelRunTx(ctx, tx, c.RunID, state.ReasonRunTimeout, message)
	})
	if err != nil {
		return false, fmt.Errorf("time out run %d: %w", c.RunID, err)
	}
	return done, nil
}

package store

import (
	"context"
	"fmt"
	"math"
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
		       dispatch_attempts, retries,
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

// StaleAgent is an agent still marked active whose last heartbeat is older
// than the threshold (Strøm phase 1).
type StaleAgent struct {
	AgentID         int64
	Name            string
	LastHeartbeatAt time.Time
	Running         int
	Age             time.Duration
}

// ListStaleAgents lists up to limit active agents silent since before
// now − threshold.
func (s *Store) ListStaleAgents(ctx context.Context, now time.Time, threshold time.Duration, limit int) ([]StaleAgent, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT a.id, a.name, a.last_heartbeat_at,
		       (SELECT count(*) FROM task_instances t WHERE t.agent_id = a.id AND t.state = 'running'),
		       (extract(epoch FROM $1::timestamptz - a.last_heartbeat_at) * 1e6)::bigint
		  FROM agents a
		 WHERE a.state = 'active' AND a.last_heartbeat_at < $1::timestamptz - $2 * interval '1 microsecond'
		 ORDER BY a.last_heartbeat_at LIMIT $3`, now, micros(threshold), limit)
	if err != nil {
		return nil, fmt.Errorf("list stale agents: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (StaleAgent, error) {
		var c StaleAgent
		var age int64
		err := r.Scan(&c.AgentID, &c.Name, &c.LastHeartbeatAt, &c.Running, &age)
		c.Age = fromMicros(age)
		return c, err
	})
}

// MarkAgentsInactive flips each listed agent to inactive in one fenced
// statement, only where it is still active with the listed heartbeat (a
// heartbeat or claim that landed since wins); its next heartbeat or claim
// reactivates it. It returns the agents that changed.
func (s *Store) MarkAgentsInactive(ctx context.Context, epoch int64, cs []StaleAgent) ([]StaleAgent, error) {
	ids, stamps := make([]int64, len(cs)), make([]time.Time, len(cs))
	byID := make(map[int64]StaleAgent, len(cs))
	for i, c := range cs {
		ids[i], stamps[i], byID[c.AgentID] = c.AgentID, c.LastHeartbeatAt, c
	}
	var landed []StaleAgent
	err := s.LeaderTx(ctx, epoch, func(tx Tx) error {
		rows, err := tx.Query(ctx, `
			UPDATE agents a SET state = 'inactive'
			  FROM unnest($1::bigint[], $2::timestamptz[]) AS i(id, stamp)
			 WHERE a.id = i.id AND a.state = 'active' AND a.last_heartbeat_at = i.stamp
			RETURNING a.id`, ids, stamps)
		if err != nil {
			return err
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		for _, id := range got {
			landed = append(landed, byID[id])
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mark %d agent(s) inactive: %w", len(cs), err)
	}
	return landed, nil
}

// ListAgents returns up to limit agents with their running counts, newest
// first, those with an id below before (0: from the newest): one page of
// GET /v1/agents, read backwards along the primary key.
func (s *Store) ListAgents(ctx context.Context, before int64, limit int) ([]Agent, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.pool.Query(ctx, `
		SELECT a.id, a.name, a.tags, a.capacity, a.state, a.registered_at, a.last_heartbeat_at,
		       (SELECT count(*) FROM task_instances t WHERE t.agent_id = a.id AND t.state = 'running')
		  FROM agents a WHERE a.id < $1 ORDER BY a.id DESC LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Agent, error) {
		var a Agent
		err := r.Scan(&a.ID, &a.Name, &a.Tags, &a.Capacity, &a.State, &a.RegisteredAt, &a.LastHeartbeatAt, &a.Running)
		return a, err
	})
}

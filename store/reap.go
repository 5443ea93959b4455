package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/scheduler/retry"
)

// The reapers' SQL (DESIGN §6). Each List* query returns only candidates
// that carry a positive observable signal; each action is ONE conditional
// UPDATE whose WHERE re-checks that exact signal, so a heartbeat, claim or
// completion that commits first wins (River #1302). Comparisons use the
// caller's now (the database clock in production, a stepped clock in
// tests); stamps written use now().

// StaleRunning is an agent-lost candidate: a running TI whose last
// heartbeat (a claim counts as the first) is older than the threshold.
type StaleRunning struct {
	TIID, RunID      int64
	TaskID           string
	TryNumber        int
	AttemptID        string
	AgentID          *int64
	LastHeartbeatAt  time.Time
	Started          bool
	DispatchAttempts int
	Policy           retry.Policy
	Age              time.Duration // now − last_heartbeat_at
}

// ListStaleRunning lists up to limit running TIs with last_heartbeat_at
// set and older than now − threshold, stalest first.
func (s *Store) ListStaleRunning(ctx context.Context, now time.Time, threshold time.Duration, limit int) ([]StaleRunning, error) {
	rows, err := s.pool.Query(ctx, runningColumns+`
		 WHERE state = 'running' AND last_heartbeat_at IS NOT NULL AND attempt_id IS NOT NULL
		   AND last_heartbeat_at < $1::timestamptz - $2 * interval '1 microsecond'
		 ORDER BY last_heartbeat_at LIMIT $3`, now, micros(threshold), limit)
	if err != nil {
		return nil, fmt.Errorf("list stale running: %w", err)
	}
	return collectRunning(rows)
}

// runningColumns selects what scanRunning reads; $1 is "now".
const runningColumns = `
		SELECT id, run_id, task_id, try_number, attempt_id::text, agent_id, last_heartbeat_at,
		       started_at IS NOT NULL, dispatch_attempts, retries,
		       (extract(epoch FROM retry_delay) * 1e6)::bigint, retry_exponential,
		       (extract(epoch FROM max_retry_delay) * 1e6)::bigint,
		       (extract(epoch FROM $1::timestamptz - last_heartbeat_at) * 1e6)::bigint
		  FROM task_instances`

func collectRunning(rows pgx.Rows) ([]StaleRunning, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (StaleRunning, error) {
		var c StaleRunning
		var delay, maxDelay, age int64
		err := r.Scan(&c.TIID, &c.RunID, &c.TaskID, &c.TryNumber, &c.AttemptID, &c.AgentID, &c.LastHeartbeatAt,
			&c.Started, &c.DispatchAttempts, &c.Policy.Retries, &delay, &c.Policy.Exponential, &maxDelay, &age)
		c.Policy.Delay, c.Policy.MaxDelay, c.Age = fromMicros(delay), fromMicros(maxDelay), fromMicros(age)
		return c, err
	})
}

// Reap is one guarded TI transition decided by a reaper.
type Reap struct {
	TIID        int64
	RunID       int64
	TaskID      string
	TryNumber   int
	AttemptID   string
	AgentID     *int64
	State       string        // new state: failed | up_for_retry | scheduled
	Reason      string        // agent_lost | dispatch_lost | execution_timeout ...
	Message     string        // human text, also the event message
	RetryDelay  time.Duration // up_for_retry only
	Requeue     bool          // never-started requeue: try_number−1, dispatch_attempts+1
	EventKind   string        // decision label, used as the event kind
	WhereState  string        // signal: the state it was listed in
	WhereStamp  time.Time     // signal: last_heartbeat_at (running) or queued_at (queued)
	StampColumn string        // "last_heartbeat_at", "queued_at" or "started_at"
	// ExtraWhere is an additional SQL predicate re-checked in the UPDATE
	// (e.g. "no active agent covers the tags"); it may use $1 (the TI id)
	// and $9 (ExtraArg).
	ExtraWhere string
	ExtraArg   any
}

// ApplyReap performs r as one fenced, conditional UPDATE plus its event.
// It reports false when the signal no longer holds (a heartbeat, claim or
// completion won the race): nothing is written then.
func (s *Store) ApplyReap(ctx context.Context, epoch int64, r Reap) (bool, error) {
	applied := false
	err := s.LeaderTx(ctx, epoch, func(tx Tx) error {
		var err error
		applied, err = applyReapTx(ctx, tx, r)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("reap task instance %d (%s): %w", r.TIID, r.EventKind, err)
	}
	return applied, nil
}

// applyReapTx is ApplyReap's guarded UPDATE and event inside tx.
func applyReapTx(ctx context.Context, tx Tx, r Reap) (bool, error) {
	switch r.StampColumn {
	case "last_heartbeat_at", "queued_at", "started_at":
	default:
		return false, fmt.Errorf("apply reap: stamp column %q is not allowed", r.StampColumn)
	}
	extra, extraArg := " AND $9::text IS NULL", any(nil) // keep $9 typed when unused
	if r.ExtraWhere != "" {
		extra, extraArg = " AND "+r.ExtraWhere, r.ExtraArg
	}
	tag, err := tx.Exec(ctx, `
		UPDATE task_instances
		   SET state = $2, reason = $3, message = $4,
		       end_date = CASE WHEN $2 = 'failed' THEN now() END,
		       next_retry_at = CASE WHEN $2 = 'up_for_retry' THEN now() + $5 * interval '1 microsecond' END,
		       try_number = CASE WHEN $6 THEN greatest(try_number - 1, 0) ELSE try_number END,
		       dispatch_attempts = CASE WHEN $6 THEN dispatch_attempts + 1 ELSE dispatch_attempts END,
		       queued_at = CASE WHEN $6 THEN NULL ELSE queued_at END,
		       updated_at = now()
		 WHERE id = $1 AND state = $7 AND `+r.StampColumn+` = $8
		   AND ($10 = '' OR attempt_id = nullif($10, '')::uuid)`+extra,
		r.TIID, r.State, r.Reason, r.Message, micros(r.RetryDelay), r.Requeue, r.WhereState, r.WhereStamp,
		extraArg, r.AttemptID)
	if err != nil || tag.RowsAffected() != 1 {
		return false, err
	}
	_, err = tx.Exec(ctx, `
		INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
		VALUES ($1, $2, $3, $4, nullif($5, '')::uuid, $6, $7, $8)`,
		r.RunID, r.TIID, r.TaskID, r.TryNumber, r.AttemptID, r.AgentID, r.EventKind, r.Message)
	if err != nil {
		return false, err
	}
	_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, ChanScheduler, fmt.Sprint(r.RunID))
	return err == nil, err
}

// StaleQueued is a dispatch-lost candidate: a queued TI whose queued_at is
// set and older than the threshold. Covered tells whether an active agent
// (heartbeat within the agent-lost threshold) offers every required tag;
// Missing lists required tags no active agent offers at all.
type StaleQueued struct {
	TIID, RunID  int64
	TaskID       string
	TryNumber    int
	QueuedAt     time.Time
	RequiredTags []string
	Covered      bool
	Missing      []string
	ActiveAgents int
	Age          time.Duration
}

// activeCoverSQL is true when an active agent that heartbeated after
// $activeSince covers the TI's required tags. It is shared by the list
// query and the UPDATE's re-check.
const activeCoverSQL = `EXISTS (SELECT 1 FROM agents a
	WHERE a.state = 'active' AND a.last_heartbeat_at > %s
	  AND (SELECT required_tags FROM task_instances WHERE id = %s) <@ a.tags)`

// ListStaleQueued lists up to limit queued TIs with queued_at older than
// now − threshold, with their tag coverage by agents active since
// now − activeWindow.
func (s *Store) ListStaleQueued(ctx context.Context, now time.Time, threshold, activeWindow time.Duration, limit int) ([]StaleQueued, error) {
	rows, err := s.pool.Query(ctx, `
		WITH live AS (
		  SELECT tags FROM agents
		   WHERE state = 'active' AND last_heartbeat_at > $1::timestamptz - $3 * interval '1 microsecond')
		SELECT t.id, t.run_id, t.task_id, t.try_number, t.queued_at, t.required_tags,
		       EXISTS (SELECT 1 FROM live WHERE t.required_tags <@ live.tags),
		       coalesce((SELECT array_agg(tag ORDER BY tag) FROM unnest(t.required_tags) tag
		                  WHERE NOT EXISTS (SELECT 1 FROM live WHERE tag = ANY (live.tags))), '{}'),
		       (SELECT count(*) FROM live),
		       (extract(epoch FROM $1::timestamptz - t.queued_at) * 1e6)::bigint
		  FROM task_instances t
		 WHERE t.state = 'queued' AND t.queued_at IS NOT NULL
		   AND t.queued_at < $1::timestamptz - $2 * interval '1 microsecond'
		 ORDER BY t.queued_at LIMIT $4`, now, micros(threshold), micros(activeWindow), limit)
	if err != nil {
		return nil, fmt.Errorf("list stale queued: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (StaleQueued, error) {
		var c StaleQueued
		var age int64
		err := r.Scan(&c.TIID, &c.RunID, &c.TaskID, &c.TryNumber, &c.QueuedAt, &c.RequiredTags, &c.Covered,
			&c.Missing, &c.ActiveAgents, &age)
		c.Age = fromMicros(age)
		return c, err
	})
}

// NoActiveCoverWhere is the UPDATE re-check for dispatch-lost: still no
// active agent (heartbeat after $9) covers the TI's tags.
var NoActiveCoverWhere = "NOT " + fmt.Sprintf(activeCoverSQL, "$9::timestamptz", "$1")

// RecordDeferred counts a backlog decision as an event once per queued
// stint of the TI (not once per sweep), so a long backlog does not flood
// the run's timeline. It reports whether an event was written.
func (s *Store) RecordDeferred(ctx context.Context, epoch int64, c StaleQueued, kind, message string) (bool, error) {
	wrote := false
	err := s.LeaderTx(ctx, epoch, func(tx Tx) error {
		tag, err := tx.Exec(ctx, `
			INSERT INTO events (run_id, ti_id, task_id, try_number, kind, message)
			SELECT $1, $2, $3, $4, $5, $6
			 WHERE NOT EXISTS (SELECT 1 FROM events
			                    WHERE run_id = $1 AND ti_id = $2 AND kind = $5 AND created_at >= $7)`,
			c.RunID, c.TIID, c.TaskID, c.TryNumber, kind, message, c.QueuedAt)
		wrote = err == nil && tag.RowsAffected() == 1
		return err
	})
	return wrote, err
}

// OrphanRun is an orphan-run candidate: a running run with no TI in
// scheduled, queued, running or up_for_retry, unchanged (run and TIs)
// since LastChange, older than the threshold. AllTerminal/AllOK classify
// how it will be finalized.
type OrphanRun struct {
	RunID       int64
	DAGID       string
	LastChange  time.Time
	AllTerminal bool
	AllOK       bool
	Pending     int // TIs still 'none'
	Age         time.Duration
}

// orphanSignalSQL selects running runs with no active TI and their last
// change; shared by list and action.
const orphanSignalSQL = `
	SELECT r.id, r.dag_id,
	       greatest(r.updated_at, max(t.updated_at)) AS last_change,
	       bool_and(t.state IN ` + tiTerminalSQL + `) AS all_terminal,
	       bool_and(t.state IN ('success', 'skipped')) AS all_ok,
	       count(*) FILTER (WHERE t.state = 'none') AS pending,
	       r.updated_at AS run_updated
	  FROM runs r JOIN task_instances t ON t.run_id = r.id
	 WHERE r.state = 'running'
	 GROUP BY r.id
	HAVING bool_and(t.state NOT IN ('scheduled', 'queued', 'running', 'up_for_retry'))`

// ListOrphanRuns lists up to limit orphan-run candidates whose last change
// is older than now − threshold.
func (s *Store) ListOrphanRuns(ctx context.Context, now time.Time, threshold time.Duration, limit int) ([]OrphanRun, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT o.id, o.dag_id, o.last_change, o.all_terminal, o.all_ok, o.pending,
		       (extract(epoch FROM $1::timestamptz - o.last_change) * 1e6)::bigint
		  FROM (`+orphanSignalSQL+`) o
		 WHERE o.last_change < $1::timestamptz - $2 * interval '1 microsecond'
		 ORDER BY o.last_change LIMIT $3`, now, micros(threshold), limit)
	if err != nil {
		return nil, fmt.Errorf("list orphan runs: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (OrphanRun, error) {
		var c OrphanRun
		var age int64
		err := r.Scan(&c.RunID, &c.DAGID, &c.LastChange, &c.AllTerminal, &c.AllOK, &c.Pending, &age)
		c.Age = fromMicros(age)
		return c, err
	})
}

// FinalizeOrphan ends an orphan run in one statement, re-checking in its
// WHERE that the run is still running, has no active TI and has not
// changed since c.LastChange. A run whose TIs are all terminal is
// finalized the normal way (success, or failed with the first failed TI's
// reason); otherwise its 'none' TIs fail with reason orphaned and the run
// fails with reason orphaned. It returns the run's new state, or "" when
// the signal no longer held.
func (s *Store) FinalizeOrphan(ctx context.Context, epoch int64, c OrphanRun, message string) (string, error) {
	var state string
	err := s.LeaderTx(ctx, epoch, func(tx Tx) error {
		err := tx.QueryRow(ctx, `
			WITH chk AS (
			  SELECT o.id, o.all_terminal, o.all_ok, o.run_updated FROM (`+orphanSignalSQL+`) o
			   WHERE o.id = $1 AND o.last_change = $2),
			culprit AS (
			  SELECT t.task_id, t.state, t.reason FROM task_instances t JOIN chk ON chk.id = t.run_id
			   WHERE t.state IN ('failed', 'cancelled') ORDER BY t.end_date NULLS LAST, t.ordinal LIMIT 1),
			tis AS (
			  UPDATE task_instances t
			     SET state = 'failed', reason = 'orphaned', message = $3, end_date = now(), updated_at = now()
			    FROM chk WHERE t.run_id = chk.id AND t.state = 'none' AND NOT chk.all_terminal
			  RETURNING t.id, t.run_id, t.task_id, t.try_number),
			tiev AS (
			  INSERT INTO events (run_id, ti_id, task_id, try_number, kind, message)
			  SELECT run_id, id, task_id, try_number, 'ti_failed', $3 FROM tis),
			upd AS (
			  UPDATE runs r
			     SET state = CASE WHEN chk.all_ok THEN 'success' ELSE 'failed' END,
			         reason = CASE WHEN chk.all_ok THEN NULL
			                       WHEN chk.all_terminal THEN coalesce((SELECT reason FROM culprit), 'upstream_failed')
			                       ELSE 'orphaned' END,
			         message = $3, end_date = now(), updated_at = now()
			    FROM chk WHERE r.id = chk.id AND r.state = 'running' AND r.updated_at = chk.run_updated
			  RETURNING r.id, r.state)
			SELECT coalesce((SELECT state FROM upd), '')`, c.RunID, c.LastChange, message).Scan(&state)
		if err != nil || state == "" {
			return err
		}
		kind := "orphan_reaped"
		if c.AllTerminal {
			kind = "orphan_finalized"
		}
		_, err = tx.Exec(ctx, `INSERT INTO events (run_id, kind, message) VALUES ($1, $2, $3)`,
			c.RunID, kind, message+" (run "+state+")")
		return err
	})
	if err != nil {
		return "", fmt.Errorf("finalize orphan run %d: %w", c.RunID, err)
	}
	return state, nil
}

// AgentRunning lists every running TI of agentID, as agent-lost-shaped
// candidates (ephemeral deregistration).
func (s *Store) AgentRunning(ctx context.Context, agentID int64) ([]StaleRunning, error) {
	rows, err := s.pool.Query(ctx, runningColumns+`
		 WHERE state = 'running' AND agent_id = $2 AND attempt_id IS NOT NULL
		   AND last_heartbeat_at IS NOT NULL ORDER BY id`, time.Now(), agentID)
	if err != nil {
		return nil, fmt.Errorf("list running of agent %d: %w", agentID, err)
	}
	return collectRunning(rows)
}

// DeregisterAgent marks an ephemeral agent deregistered and applies the
// given guarded transitions to its running TIs, in one transaction (KiCI
// scaler-managed agents: no recovery window). It returns those that landed.
// Errors: ErrNotFound when the agent does not exist.
func (s *Store) DeregisterAgent(ctx context.Context, agentID int64, reaps []Reap) ([]Reap, error) {
	var landed []Reap
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE agents SET state = 'deregistered' WHERE id = $1`, agentID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("agent %d: %w", agentID, ErrNotFound)
		}
		for _, r := range reaps {
			ok, err := applyReapTx(ctx, tx, r)
			if err != nil {
				return err
			}
			if ok {
				landed = append(landed, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("deregister agent %d: %w", agentID, err)
	}
	return landed, nil
}

package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
)

// Heartbeat refreshes the agent and every listed current attempt in one
// transaction: last_heartbeat_at = now(), and started_at (with timeout_at
// and a ti_started event) on the first report with Started. It returns the
// listed attempts the agent must stop and the database clock. Errors:
// ErrNotFound when the agent is unknown or deregistered (the agent must
// register again). docs/design.md §4 heartbeat.
//
// Every statement finds its TI rows by primary key from an array, and
// which listed attempts are current is decided here, between two
// round trips, not by a join in SQL. A join of the listed attempts with the
// agent's TIs is linear only under the plan the planner picks when it
// knows how many TIs an agent runs; after a mass claim its statistics say
// one, and it looped over the listed attempts for each TI: n² rows at n
// attempts, 128 ms a call at 1,000 in `make bench`
// (TestHeartbeatWorkIsLinearInItsAttempts).
//
// The agent's current rows are locked first, in id order, as a completion
// batch locks them: an attempt whose completion is in flight is still
// listed here, and two orders over the same rows deadlock.
func (s *Store) Heartbeat(ctx context.Context, agentID int64, entries []HeartbeatEntry) ([]StopOrder, time.Time, error) {
	ids := make([]int64, len(entries))
	for i, e := range entries {
		ids[i] = e.TIID
	}
	var (
		agentOK bool
		now     time.Time
		stops   []StopOrder
	)
	err := pgx.BeginFunc(ctx, s.db(ctx), func(tx pgx.Tx) error {
		held := make(map[int64]heldAttempt, len(entries))
		first := &pgx.Batch{}
		first.Queue(heartbeatAgentSQL, agentID).QueryRow(func(row pgx.Row) error {
			return row.Scan(&agentOK, &now)
		})
		first.Queue(heartbeatLockSQL, agentID, ids).Query(func(rows pgx.Rows) error {
			var id int64
			var h heldAttempt
			_, err := pgx.ForEachRow(rows, []any{&id, &h.attemptID, &h.started}, func() error {
				held[id] = h
				return nil
			})
			return err
		})
		if err := tx.SendBatch(ctx, first).Close(); err != nil {
			return err
		}
		if !agentOK {
			return nil
		}
		refresh, starts, stale := sortListed(entries, held)
		second := &pgx.Batch{}
		if len(refresh) > 0 {
			second.Queue(heartbeatRefreshSQL, refresh)
		}
		if len(starts) > 0 {
			second.Queue(heartbeatStartSQL, starts)
		}
		if len(stale) > 0 {
			second.Queue(heartbeatStaleSQL, staleIDs(stale)).Query(func(rows pgx.Rows) error {
				var err error
				stops, err = stopOrders(rows, stale)
				return err
			})
		}
		second.Queue(heartbeatOldestSQL, agentID)
		return tx.SendBatch(ctx, second).Close()
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("heartbeat of agent %d: %w", agentID, err)
	}
	if !agentOK {
		return nil, now, fmt.Errorf("agent %d: %w", agentID, ErrNotFound)
	}
	return stops, now, nil
}

// heldAttempt is a running TI of the heartbeating agent, as locked by
// heartbeatLockSQL.
type heldAttempt struct {
	attemptID string
	started   bool // started_at is set
}

// sortListed splits a heartbeat's entries by what the agent's locked rows
// say: refresh, current attempts to stamp; starts, current attempts first
// reported started; stale, the rest, whose agent must stop them.
func sortListed(entries []HeartbeatEntry, held map[int64]heldAttempt) (refresh, starts []int64, stale []Attempt) {
	for _, e := range entries {
		h, ok := held[e.TIID]
		switch {
		case !ok || h.attemptID != e.AttemptID:
			stale = append(stale, e.Attempt)
		case e.Started && !h.started:
			starts = append(starts, e.TIID)
		default:
			refresh = append(refresh, e.TIID)
		}
	}
	return refresh, starts, stale
}

func staleIDs(stale []Attempt) []int64 {
	ids := make([]int64, len(stale))
	for i, a := range stale {
		ids[i] = a.TIID
	}
	return ids
}

// stopOrders reads heartbeatStaleSQL's rows and gives each stale attempt
// its reason; a TI with no row is unknown.
func stopOrders(rows pgx.Rows, stale []Attempt) ([]StopOrder, error) {
	type row struct {
		state   state.TI
		current string
		reason  state.Reason
	}
	found := map[int64]row{}
	var id int64
	var r row
	var current, reason *string
	if _, err := pgx.ForEachRow(rows, []any{&id, &r.state, &current, &reason}, func() error {
		r.current, r.reason = deref(current), state.Reason(deref(reason))
		found[id] = r
		return nil
	}); err != nil {
		return nil, err
	}
	stops := make([]StopOrder, 0, len(stale))
	for _, a := range stale {
		r := found[a.TIID]
		stops = append(stops, StopOrder{Attempt: a, Reason: stopReason(r.state, r.current, a.AttemptID, r.reason)})
	}
	return stops, nil
}

// heartbeatAgentSQL locks agent $1's row first, as a claim's update of it
// does, and returns whether the agent is registered and now(). The row is
// written once, last (heartbeatOldestSQL).
const heartbeatAgentSQL = `
	SELECT coalesce((SELECT state <> 'deregistered' FROM agents WHERE id = $1 FOR NO KEY UPDATE), false), now()`

// heartbeatLockSQL locks, in id order, the listed TIs ($2) that run on
// agent $1, and returns their attempt ids and whether they have started.
const heartbeatLockSQL = `
	SELECT id, attempt_id::text, started_at IS NOT NULL FROM task_instances
	 WHERE id = ANY ($2::bigint[]) AND agent_id = $1 AND state = 'running'
	 ORDER BY id FOR NO KEY UPDATE`

// heartbeatRefreshSQL stamps the TIs $1, locked by heartbeatLockSQL. Only
// an unindexed column changes, so the update is heap-only.
const heartbeatRefreshSQL = `
	UPDATE task_instances SET last_heartbeat_at = now() WHERE id = ANY ($1::bigint[])`

// heartbeatStartSQL stamps the TIs $1, locked by heartbeatLockSQL and first
// reported started, records their start and execution deadline, and writes
// their ti_started events.
const heartbeatStartSQL = `
	WITH s AS (
	  UPDATE task_instances
	     SET last_heartbeat_at = now(), started_at = now(), timeout_at = now() + execution_timeout
	   WHERE id = ANY ($1::bigint[])
	  RETURNING id, run_id, task_id, try_number, attempt_id, agent_id)
	INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
	SELECT run_id, id, task_id, try_number, attempt_id, agent_id, 'ti_started',
	       format('try %s started on agent %s', try_number, agent_id)
	  FROM s`

// heartbeatStaleSQL reads the state, current attempt and reason of the
// TIs $1 whose listed attempt is not current on the agent.
const heartbeatStaleSQL = `
	SELECT id, state, attempt_id::text, reason FROM task_instances WHERE id = ANY ($1::bigint[])`

// heartbeatOldestSQL stamps agent $1, last in the heartbeat's
// transaction, and sets its oldest_heartbeat_at: no later than the stamp
// of any running TI of the agent once it commits (the listed ones now
// hold now()), so the agent-lost reaper finds every stale TI through it.
// Computed after the stamps, it needs no join with the listed attempts.
const heartbeatOldestSQL = `
	UPDATE agents SET last_heartbeat_at = now(), state = 'active',
	       oldest_heartbeat_at = least(now(), (
	         SELECT min(t.last_heartbeat_at) FROM task_instances t
	          WHERE t.agent_id = $1 AND t.state = 'running'))
	 WHERE id = $1`

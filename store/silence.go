package store

import (
	"context"
	"fmt"
	"time"
)

// SilenceWindow is what MassSilenceWindow found: the agents that went
// silent within one window of the latest silence, and the agents that were
// alive when that window opened.
type SilenceWindow struct {
	// Anchor is the last heartbeat of the most recently silenced agent; the
	// window is [Anchor − window, Anchor]. Zero when no agent is silent.
	Anchor time.Time
	// Silent counts the agents (not deregistered) whose last heartbeat is
	// older than now − window and falls within the window.
	Silent int
	// Active counts the agents (not deregistered) that heartbeated at or
	// after the window opened: Silent plus every agent still alive.
	Active int
}

// MassSilenceWindow measures the latest silence among agents for the
// mass-silence brake (docs/scheduler-resilience.md): an agent is silent
// when its last heartbeat (or claim) is older than now − window (the
// agent-lost threshold). Deregistered agents left on purpose and count in
// neither number. One read of the agents table; it writes nothing.
func (s *Store) MassSilenceWindow(ctx context.Context, now time.Time, window time.Duration) (SilenceWindow, error) {
	var w SilenceWindow
	var anchor *time.Time
	err := s.pool.QueryRow(ctx, `
		WITH c AS (SELECT $1::timestamptz - $2 * interval '1 microsecond' AS cut),
		anchor AS (
		  SELECT max(a.last_heartbeat_at) AS l FROM agents a, c
		   WHERE a.state <> 'deregistered' AND a.last_heartbeat_at < c.cut)
		SELECT anchor.l,
		       count(a.id) FILTER (WHERE a.last_heartbeat_at < c.cut),
		       count(a.id)
		  FROM anchor CROSS JOIN c
		  LEFT JOIN agents a ON a.state <> 'deregistered'
		                    AND a.last_heartbeat_at >= anchor.l - $2 * interval '1 microsecond'
		 GROUP BY anchor.l`, now, micros(window)).Scan(&anchor, &w.Silent, &w.Active)
	if err != nil {
		return SilenceWindow{}, fmt.Errorf("measure agent silence: %w", err)
	}
	if anchor != nil {
		w.Anchor = *anchor
	}
	return w, nil
}

// settingForcedSweep names the settings row whose updated_at is when an
// operator last asked a follower for a forced sweep (RequestForcedSweep).
const settingForcedSweep = "reap.forced_sweep_requested"

// RequestForcedSweep asks the leader, wherever it runs, for a forced sweep
// (vigil reap on a follower): it records the request's time (database
// clock) in the settings table, which every replica shares, and wakes the
// leader's reapers like RequestSweep. The leader's next agent-lost and
// dispatch-lost passes then bypass the mass-silence brake once each.
func (s *Store) RequestForcedSweep(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `
		WITH w AS (
		  INSERT INTO settings (name, value) VALUES ($1, 'requested by vigil reap on a follower')
		  ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now())
		SELECT pg_notify($2, 'sweep')`, settingForcedSweep, ChanReap)
	if err != nil {
		return fmt.Errorf("request a forced sweep: %w", err)
	}
	return nil
}

// ForcedSweepRequestedAt returns when RequestForcedSweep was last called,
// on the database clock, or the zero time if never.
func (s *Store) ForcedSweepRequestedAt(ctx context.Context) (time.Time, error) {
	var at time.Time
	err := s.pool.QueryRow(ctx, `SELECT updated_at FROM settings WHERE name = $1`, settingForcedSweep).Scan(&at)
	if errNoRows(err) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read forced sweep request: %w", err)
	}
	return at, nil
}

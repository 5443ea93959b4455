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

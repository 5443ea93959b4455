package store

import (
	"context"
	"fmt"
	"time"
)

// Retention (docs/design.md §7; horsies retention cleanup): the leader prunes old
// terminal runs (their TIs and logs go with them through ON DELETE
// CASCADE, their events in the same statement: events carry no foreign
// key, adr/0022) and long-silent inactive or deregistered agents, in
// fenced batches. A run that is not terminal is never touched.

// PruneRuns deletes up to batch terminal runs that ended before
// now − olderThan and reports how many went.
func (s *Store) PruneRuns(ctx context.Context, epoch int64, olderThan time.Duration, batch int) (int, error) {
	return s.leaderExec(ctx, epoch, "prune runs", `
		WITH gone AS (
		  DELETE FROM runs WHERE id IN (
		    SELECT id FROM runs
		     WHERE state IN `+runTerminalSQL+` AND end_date < now() - $1 * interval '1 microsecond'
		     ORDER BY end_date LIMIT $2)
		  RETURNING id),
		ev AS (
		  DELETE FROM events e USING gone WHERE e.run_id = gone.id)
		SELECT id FROM gone`, micros(olderThan), batch)
}

// PruneAgents deletes up to batch inactive or deregistered agents silent
// since before now − olderThan; TIs that named them keep their history
// with agent_id set to NULL.
func (s *Store) PruneAgents(ctx context.Context, epoch int64, olderThan time.Duration, batch int) (int, error) {
	n, err := s.leaderExec(ctx, epoch, "prune agents", `
		DELETE FROM agents WHERE id IN (
		  SELECT id FROM agents
		   WHERE state IN ('inactive', 'deregistered') AND last_heartbeat_at < now() - $1 * interval '1 microsecond'
		   ORDER BY last_heartbeat_at LIMIT $2)`, micros(olderThan), batch)
	if err != nil {
		return 0, fmt.Errorf("prune agents: %w", err)
	}
	return n, nil
}

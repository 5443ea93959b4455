package store

import (
	"context"
	"fmt"
	"time"
)

// Retention (docs/design.md §7; horsies retention cleanup): the leader prunes old
// terminal runs (their TIs and logs go with them through ON DELETE
// CASCADE, their events in the same statement: events carry no foreign
// key, adr/0022) and long-silent inactive or deregistered agents (their
// TIs unlinked in the same statement, adr/0027), in fenced batches. A
// run that is not terminal is never touched.

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
// since before now − olderThan, and reports how many went; their TIs keep
// their history with agent_id NULL (adr/0027). The rows are locked and the
// rule re-checked on their latest version, so an agent a concurrent claim
// reactivated is kept, and a later claim finds no row and takes nothing.
func (s *Store) PruneAgents(ctx context.Context, epoch int64, olderThan time.Duration, batch int) (int, error) {
	n, err := s.leaderExec(ctx, epoch, "prune agents", pruneAgentsSQL, micros(olderThan), batch)
	if err != nil {
		return 0, fmt.Errorf("prune agents: %w", err)
	}
	return n, nil
}

// pruneAgentsSQL is PruneAgents' statement ($1 the age in microseconds,
// $2 the batch). The unlink reads gone, so it runs after the lock; both
// writes find their rows by key from an array, so no join can be planned
// as a scan of task_instances or agents, under a custom plan or a generic
// one (the scan proof checks both).
var pruneAgentsSQL = `
		WITH gone AS (
		  SELECT id FROM agents
		   WHERE state IN ` + agentIdleSQL + ` AND last_heartbeat_at < now() - $1 * interval '1 microsecond'
		   ORDER BY last_heartbeat_at LIMIT $2
		     FOR UPDATE),
		unlink AS (
		  UPDATE task_instances t SET agent_id = NULL
		   WHERE t.agent_id = ANY (ARRAY (SELECT id FROM gone)) AND t.agent_id IS NOT NULL)
		DELETE FROM agents a WHERE a.id = ANY (ARRAY (SELECT id FROM gone))`

package store

import (
	"context"
	"fmt"
)

// LiveTICountsSQL counts the queued and running task instances among at
// most $1 live ones. Its WHERE clause is the predicate of the partial
// index ti_live_idx (scheduled, queued, running, up_for_retry), so the
// read is bounded by the live work and never touches history; the LIMIT
// bounds it again under a huge backlog.
var LiveTICountsSQL = `
SELECT count(*) FILTER (WHERE state = 'queued'), count(*) FILTER (WHERE state = 'running')
  FROM (SELECT state FROM task_instances
         WHERE state IN ` + tiActiveSQL + `
         LIMIT $1) live`

// LiveTICounts returns how many task instances are queued and running,
// reading at most limit live task instances (each count saturates there).
// The leader sets the vigil_task_instances gauge from it.
func (s *Store) LiveTICounts(ctx context.Context, limit int) (queued, running int, err error) {
	if err := s.pool.QueryRow(ctx, LiveTICountsSQL, limit).Scan(&queued, &running); err != nil {
		return 0, 0, fmt.Errorf("count live task instances: %w", err)
	}
	return queued, running, nil
}

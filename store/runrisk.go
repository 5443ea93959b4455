package store

import (
	"context"
	"fmt"
	"time"
)

// RunRunning lists the running TIs of one run, by id, in the shape of
// agent-lost candidates (ListStaleRunning) whatever their heartbeat's
// age, so the caller can judge each with the reapers' own rules: the
// run page's overdue hint (reaper.Reapers.AtRisk for one run).
func (s *Store) RunRunning(ctx context.Context, runID int64, now time.Time) ([]StaleRunning, error) {
	rows, err := s.pool.Query(ctx, runningColumns+`
		 WHERE t.run_id = $2 AND t.state = 'running' AND t.attempt_id IS NOT NULL
		 ORDER BY t.id`, now, runID)
	if err != nil {
		return nil, fmt.Errorf("running tis of run %d: %w", runID, err)
	}
	return collectRunning(rows)
}

// RunQueued lists the queued TIs of one run, by id, each with its tag
// coverage by the agents active since now − activeWindow, in the shape
// of dispatch-lost candidates (ListStaleQueued) whatever their age: the
// reason a queued TI of `runs show` and the run page waits.
func (s *Store) RunQueued(ctx context.Context, runID int64, now time.Time, activeWindow time.Duration) ([]StaleQueued, error) {
	rows, err := s.pool.Query(ctx, `WITH `+liveAgentsCTE+`
		`+queuedColumns+`
		  FROM task_instances t
		 WHERE t.run_id = $2 AND t.state = 'queued' AND t.queued_at IS NOT NULL
		 ORDER BY t.id`, now, runID, micros(activeWindow))
	if err != nil {
		return nil, fmt.Errorf("queued tis of run %d: %w", runID, err)
	}
	return collectQueued(rows)
}

package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// runEventsPageSQL reads up to $3 events of run $1 after id $2 from
// events' primary key (run_id, id): the page's rows, whatever the history.
const runEventsPageSQL = `
	SELECT id, run_id, created_at, kind, ti_id, coalesce(task_id, ''), try_number,
	       coalesce(attempt_id::text, ''), agent_id, message
	  FROM events WHERE run_id = $1 AND id > $2 ORDER BY id LIMIT $3`

// RunEventsPage returns one page of run runID's timeline: the events with
// an id above afterID, oldest first (by id), at most limit of them. The
// page's NextCursor is the id of its last event when more events followed,
// and nil when the page reached the end of the timeline as it stood.
// The read is served by events' primary key (run_id, id) (migration 029).
//
// afterID must be ≥ 0 (0 reads from the start) and limit in
// 1..EventsPageMax; the API checks both before calling. Errors:
// ErrNotFound when the run does not exist; a plain error naming afterID or
// limit when it is out of range.
func (s *Store) RunEventsPage(ctx context.Context, runID, afterID int64, limit int) (EventPage, error) {
	if afterID < 0 {
		return EventPage{}, fmt.Errorf("run %d events: afterID %d must not be negative", runID, afterID)
	}
	if limit < 1 || limit > EventsPageMax {
		return EventPage{}, fmt.Errorf("run %d events: limit %d must be in 1..%d", runID, limit, EventsPageMax)
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)`, runID).Scan(&exists); err != nil {
		return EventPage{}, fmt.Errorf("run %d events: %w", runID, err)
	}
	if !exists {
		return EventPage{}, fmt.Errorf("run %d: %w", runID, ErrNotFound)
	}
	// One row past the page tells whether another page follows.
	rows, err := s.pool.Query(ctx, runEventsPageSQL, runID, afterID, limit+1)
	if err != nil {
		return EventPage{}, fmt.Errorf("run %d events: %w", runID, err)
	}
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		err := r.Scan(&e.ID, &e.RunID, &e.Time, &e.Kind, &e.TIID, &e.TaskID, &e.TryNumber, &e.AttemptID, &e.AgentID, &e.Message)
		return e, err
	})
	if err != nil {
		return EventPage{}, fmt.Errorf("run %d events: %w", runID, err)
	}
	page := EventPage{Events: events}
	if len(events) > limit {
		page.Events = events[:limit]
		next := events[limit-1].ID
		page.NextCursor = &next
	}
	if page.Events == nil {
		page.Events = []Event{}
	}
	return page, nil
}

// RunEvents returns all of run runID's timeline after afterID (≥ 0),
// oldest first, reading it in pages of EventsPageMax. It holds
// the whole timeline in memory: it is for tests and for callers that know
// the run is small; the API serves the timeline a page at a time with
// RunEventsPage. Errors: those of RunEventsPage.
func (s *Store) RunEvents(ctx context.Context, runID, afterID int64) ([]Event, error) {
	var all []Event
	for {
		page, err := s.RunEventsPage(ctx, runID, afterID, EventsPageMax)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Events...)
		if page.NextCursor == nil {
			return all, nil
		}
		afterID = *page.NextCursor
	}
}

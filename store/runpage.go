package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// TIsPageMax is the largest page GetRunPage returns, in TIs: a run of
// 10,000 TIs in one reply cost about 93 ms at p50 (docs/performance.md),
// a page of this size a tenth of that.
const TIsPageMax = 1000

// runTIsPageSQL reads one page of a run's TIs in declaration order: those
// whose ordinal (the task's place in the DAG, from 0) is above after, as
// GET /v1/runs/{id}/outputs pages. ti_run_ordinal_idx (migration 028)
// serves the page in order: rows read are the page's, never the run's
// other TIs or the history's. $1 run id, $2 after, $3 rows.
const runTIsPageSQL = `SELECT ` + tiColumns + ` FROM task_instances t
	WHERE t.run_id = $1 AND t.ordinal > $2 ORDER BY t.ordinal LIMIT $3`

// RunPage is a run with one page of its TIs (GetRunPage). NextCursor is
// the after of the next page (the ordinal of this page's last TI) when
// more TIs follow, nil on the last page. The run's TaskCounts always
// count all of its TIs.
type RunPage struct {
	RunDetail
	NextCursor *int
}

// GetRunPage returns run id with at most limit of its TIs whose ordinal
// is above after, in declaration order, each with its late completion if
// any. after -1 reads from the start; it must be ≥ -1 and limit in
// 1..TIsPageMax; the API checks both first. Errors: ErrNotFound when the
// run does not exist; a plain error naming after or limit when out of
// range. The run row and the page are two reads, not one snapshot: a TI
// may have moved on between them, as between two polls.
func (s *Store) GetRunPage(ctx context.Context, id int64, after, limit int) (RunPage, error) {
	if after < -1 {
		return RunPage{}, fmt.Errorf("run %d task instances: after %d must be -1 (from the start) or an ordinal", id, after)
	}
	if limit < 1 || limit > TIsPageMax {
		return RunPage{}, fmt.Errorf("run %d task instances: limit %d must be in 1..%d", id, limit, TIsPageMax)
	}
	run, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM runs r WHERE r.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return RunPage{}, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return RunPage{}, fmt.Errorf("get run %d: %w", id, err)
	}
	// One row past the page tells whether another page follows.
	rows, err := s.pool.Query(ctx, runTIsPageSQL, id, after, limit+1)
	if err != nil {
		return RunPage{}, fmt.Errorf("get run %d: %w", id, err)
	}
	tis, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TaskInstance, error) { return scanTI(r) })
	if err != nil {
		return RunPage{}, fmt.Errorf("get run %d: %w", id, err)
	}
	page := RunPage{}
	if len(tis) > limit {
		tis = tis[:limit]
		next := tis[limit-1].Ordinal
		page.NextCursor = &next
	}
	if err := s.attachLate(ctx, id, tis); err != nil {
		return RunPage{}, fmt.Errorf("get run %d: %w", id, err)
	}
	if tis == nil {
		tis = []TaskInstance{}
	}
	page.RunDetail = RunDetail{Run: run, TaskInstances: tis}
	return page, nil
}

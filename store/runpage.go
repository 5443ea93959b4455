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

// runTIsPageSQL reads one page of a run's TIs in task id order, those
// whose task id sorts after $2 (” from the start): the order of the
// (run_id, task_id) unique key, which serves the page without a sort, so
// rows read are the page's, never the run's other TIs nor the history's.
// Declaration order would need an index of its own on (run_id, ordinal),
// one more entry for every TI version written (migration 030 drops the
// one 028 added: +14% WAL per TI); callers that want declaration order
// sort by TaskInstance.Ordinal. The order is the database's collation
// (the key's): byte order under Lite's C locale, perhaps another on a Pro
// database, the cursor compared in the same one either way. $1 run id,
// $2 after, $3 rows.
const runTIsPageSQL = `SELECT ` + tiColumns + ` FROM task_instances t
	WHERE t.run_id = $1 AND t.task_id > $2 ORDER BY t.task_id LIMIT $3`

// RunPage is a run with one page of its TIs (GetRunPage). NextCursor is
// the after of the next page (the task id of this page's last TI) when
// more TIs follow, nil on the last page. The run's TaskCounts always
// count all of its TIs.
type RunPage struct {
	RunDetail
	NextCursor *string
}

// GetRunPage returns run id with at most limit of its TIs whose task id
// sorts after after (the database's collation; "" reads from the start),
// in that order, each with its late completion if any. limit must be in
// 1..TIsPageMax; the API checks it first. Errors: ErrNotFound when the
// run does not exist; a plain error naming limit when out of range. The
// run row and the page are two reads, not one snapshot: a TI may have
// moved on between them, as between two polls.
func (s *Store) GetRunPage(ctx context.Context, id int64, after string, limit int) (RunPage, error) {
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
		next := tis[limit-1].TaskID
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

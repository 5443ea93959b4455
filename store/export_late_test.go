package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// ScheduleRunsForTest runs the scheduler's per-run pass (run locks first,
// then dependency resolution, queueing and finalization) over ids inside
// the caller's transaction, so a test can hold it open. Test builds only.
func ScheduleRunsForTest(ctx context.Context, tx pgx.Tx, ids []int64) (TickResult, error) {
	return scheduleRunsTx(ctx, tx, ids)
}

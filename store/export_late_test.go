package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// SetLateHookForTest makes every late success accepted by s call hook
// inside its transaction, after its writes and before its commit, while it
// holds the run row lock. Test builds only; set it before s is shared.
func SetLateHookForTest(s *Store, hook func(ctx context.Context)) { s.lateHook = hook }

// ScheduleRunsForTest runs the scheduler's per-run pass (run locks first,
// then dependency resolution, queueing and finalization) over ids inside
// the caller's transaction, so a test can hold it open. Test builds only.
func ScheduleRunsForTest(ctx context.Context, tx pgx.Tx, ids []int64) (TickResult, error) {
	return scheduleRunsTx(ctx, tx, ids)
}

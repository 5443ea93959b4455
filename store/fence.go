package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// FenceName is the leader_fence row guarding the scheduler and reapers.
const FenceName = "scheduler"

// FencedError is returned by LeaderTx when the fence holds another epoch:
// a newer leader exists and this one must stop leading at once
// (DESIGN §8, Temporal-style range_id fencing).
type FencedError struct {
	Ours    int64
	Current int64
	Holder  string
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("leader write fenced: our epoch %d, fence epoch %d held by %q", e.Ours, e.Current, e.Holder)
}

// IsFenced reports whether err is (or wraps) a *FencedError.
func IsFenced(err error) bool {
	var f *FencedError
	return errors.As(err, &f)
}

// NextLiteEpoch draws a fresh epoch from the database sequence, for the
// static (Lite) elector. Each process start gets a larger value, so a
// second Lite process against the same database fences out the first.
func (s *Store) NextLiteEpoch(ctx context.Context) (int64, error) {
	var e int64
	err := s.pool.QueryRow(ctx, `SELECT nextval('leader_epoch_seq')`).Scan(&e)
	return e, err
}

// AcquireFence sets the fence to epoch for holder if epoch is newer than
// the stored one (UPDATE ... WHERE epoch < $epoch). It returns a
// *FencedError when the fence already holds an equal or newer epoch.
func (s *Store) AcquireFence(ctx context.Context, epoch int64, holder string) error {
	tag, err := s.pool.Exec(ctx, `
		UPDATE leader_fence SET epoch = $2, holder = $3, acquired_at = now()
		WHERE name = $1 AND epoch < $2`, FenceName, epoch, holder)
	if err != nil {
		return fmt.Errorf("acquire fence: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	cur, h, err := s.Fence(ctx)
	if err != nil {
		return fmt.Errorf("acquire fence: %w", err)
	}
	return &FencedError{Ours: epoch, Current: cur, Holder: h}
}

// Fence returns the current fence epoch and its holder.
func (s *Store) Fence(ctx context.Context) (epoch int64, holder string, err error) {
	var h *string
	err = s.pool.QueryRow(ctx, `SELECT epoch, holder FROM leader_fence WHERE name = $1`, FenceName).Scan(&epoch, &h)
	if h != nil {
		holder = *h
	}
	return epoch, holder, err
}

// Tx is the transaction handed to LeaderTx callbacks.
type Tx = pgx.Tx

// LeaderTx runs fn in a transaction that first locks the fence row FOR
// SHARE and checks it still holds epoch. If not, nothing is written and a
// *FencedError is returned. FOR SHARE blocks a newer leader's
// AcquireFence until this transaction ends, so no write from a deposed
// epoch can commit after the fence moved (DESIGN §8).
func (s *Store) LeaderTx(ctx context.Context, epoch int64, fn func(tx Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var cur int64
		var holder *string
		err := tx.QueryRow(ctx, `SELECT epoch, holder FROM leader_fence WHERE name = $1 FOR SHARE`, FenceName).Scan(&cur, &holder)
		if err != nil {
			return fmt.Errorf("check fence: %w", err)
		}
		if cur != epoch {
			h := ""
			if holder != nil {
				h = *holder
			}
			return &FencedError{Ours: epoch, Current: cur, Holder: h}
		}
		return fn(tx)
	})
}

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
// (docs/design.md §8, Temporal-style range_id fencing). AcquireFence and
// AcquireFenceIn return it when the fence refuses a candidate; then
// Refusal says why and Fence holds the fence as it was read.
type FencedError struct {
	Ours    int64 // our token (epoch)
	Current int64 // the fence's token
	Holder  string
	// Refusal is set by AcquireFenceIn: FenceRefusedRevision or
	// FenceRefusedDomain. Empty from LeaderTx and AcquireFence.
	Refusal string
	// Domain and Revision are the candidate's, from AcquireFenceIn.
	Domain   FenceDomain
	Revision int64
	// Fence is the fence row that refused the candidate (AcquireFenceIn).
	Fence *FenceState
}

func (e *FencedError) Error() string {
	if e.Refusal != "" && e.Fence != nil {
		return fmt.Sprintf("leader fence refused %s revision %d: %s (fence: generation %d, domain %s, revision %d, held by %q)",
			e.Domain, e.Revision, e.Refusal, e.Fence.Generation, e.Fence.Domain.String(), e.Fence.Revision, e.Holder)
	}
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

// AcquireFence sets the fence to the raw token epoch for holder if epoch
// is newer than the stored one (UPDATE ... WHERE epoch < $epoch), keeping
// the fence's generation and domain; the electors use AcquireFenceIn,
// which names the domain. It is for tests and tools. It returns a
// *FencedError when the fence already holds an equal or newer epoch:
// final, this epoch can never lead. It runs on the leader pool, so when an
// older term's leader transaction still holds the row FOR SHARE it waits
// at most LeaderTimeouts.Lock and then fails with an error IsLockTimeout
// reports; the caller retries while it still holds its election (the old
// transaction ends at the latest after LeaderTimeouts.IdleInTransaction).
func (s *Store) AcquireFence(ctx context.Context, epoch int64, holder string) error {
	tag, err := s.leader.Exec(ctx, `
		UPDATE leader_fence SET epoch = $2, revision = $2 - generation * $4, holder = $3, acquired_at = now()
		WHERE name = $1 AND epoch < $2 AND $2 - generation * $4 < $4`, FenceName, epoch, holder, int64(FenceRevisionLimit))
	if IsLockTimeout(err) {
		return fmt.Errorf("acquire fence: an older term's leader transaction still locks it (lock_timeout %s): %w",
			s.leaderTimeouts.Lock, err)
	}
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
// epoch can commit after the fence moved (docs/design.md §8).
//
// The transaction runs on the leader pool, bounded by LeaderTimeouts: a
// statement waits for a lock at most Lock and runs at most Statement, and
// PostgreSQL terminates the session when it sits idle inside the
// transaction for IdleInTransaction, so fn must only run its statements
// and never wait on anything else. Errors from fn are returned as is.
func (s *Store) LeaderTx(ctx context.Context, epoch int64, fn func(tx Tx) error) error {
	tx, err := s.leader.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin leader transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
	if err := checkFence(ctx, tx, epoch); err != nil {
		return err
	}
	if f := s.signals.HoldLeaderTx; f != nil {
		if held, err := f(ctx, tx, epoch); held {
			return err
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// checkFence locks the fence row FOR SHARE and returns a *FencedError
// unless it holds epoch. The same statement sets the transaction-local
// vigil.epoch, which events.epoch defaults to (migration 012), so every
// event the transaction writes records the term that wrote it.
func checkFence(ctx context.Context, tx pgx.Tx, epoch int64) error {
	var cur int64
	var holder *string
	err := tx.QueryRow(ctx, checkFenceSQL, FenceName, epoch).Scan(&cur, &holder, nil)
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
	return nil
}

package store

import "context"

// TestSignals are the points where a test steps inside the store's
// transactions (River's TestSignals pattern). Every field is optional;
// production leaves them all nil, and nothing in the shipped binary sets
// one (the e2e build of internal/testhook aside, see testhook_on.go).
type TestSignals struct {
	// PassTaken runs inside SchedulePass's transaction once it has taken
	// its runs, before the scheduling steps; an error fails the pass as a
	// statement's would. Tests make one batch's transaction fail like a
	// deadline with it.
	PassTaken func(ctx context.Context, tx Tx, runIDs []int64) error
	// LateAccepted runs inside the transaction of every late success the
	// store accepts, after its writes and before its commit, while it
	// holds the run row lock: tests hold the transaction open in it.
	LateAccepted func(ctx context.Context)
	// HoldLeaderTx, when set, runs in place of the callback of every
	// LeaderTx that passes the fence check, inside that transaction, and
	// returns its result. It reports false to let the callback run as
	// usual. It is how the e2e test freezes a leader inside a fenced
	// transaction (internal/testhook.HoldLeaderTx).
	HoldLeaderTx func(ctx context.Context, tx Tx, epoch int64) (bool, error)
	// NotificationsDue runs in DueNotifications after it read a non-empty
	// batch (n rows), outside any transaction, before it returns them; an
	// error is returned instead of the batch. The e2e test holds a
	// leader's delivery in it, between a state change and its delivery
	// (internal/testhook.HoldDelivery).
	NotificationsDue func(ctx context.Context, n int) error
}

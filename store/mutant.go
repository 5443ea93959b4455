//go:build !mutant_fence_nolock

package store

// checkFenceSQL reads the fence and locks its row FOR SHARE until the
// leader transaction ends, which keeps a newer leader's AcquireFence
// waiting meanwhile (docs/design.md §8). `make mutants` builds a mutant
// (tag mutant_fence_nolock) without the lock, which
// e2e's TestProFenceRowLockKeepsADeposedLeaderOut must catch; no shipped
// build sets that tag (scripts/mutants.sh).
const checkFenceSQL = `SELECT epoch, holder, set_config('vigil.epoch', $2::bigint::text, true)
	FROM leader_fence WHERE name = $1 FOR SHARE`

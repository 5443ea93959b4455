//go:build mutant_fence_nolock

package store

// checkFenceSQL, mutated: the fence is read without its row lock
// (scripts/mutants.sh; never shipped).
const checkFenceSQL = `SELECT epoch, holder, set_config('vigil.epoch', $2::bigint::text, true)
	FROM leader_fence WHERE name = $1`

//go:build mutant_reaper_early

package reaper

import "time"

// agentLostHorizon, mutated: the reaper acts at half its threshold
// (scripts/mutants.sh; never shipped).
func agentLostHorizon(threshold time.Duration) time.Duration { return threshold / 2 }

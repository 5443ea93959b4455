//go:build !mutant_reaper_early

package reaper

import "time"

// agentLostHorizon is the silence after which the agent-lost reaper lists
// an attempt: its whole threshold. `make mutants` builds a mutant (tag
// mutant_reaper_early) that halves it, which the short chaos run must
// report as invariant 1 violations; no shipped build sets that tag
// (scripts/mutants.sh).
func agentLostHorizon(threshold time.Duration) time.Duration { return threshold }

//go:build mutant_completions_open

package api

// completionsAccess, mutated: any holder of the agent token may complete
// any agent's attempts (scripts/mutants.sh; never shipped).
const completionsAccess = AccessAgent

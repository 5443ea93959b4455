//go:build !mutant_completions_open

package api

// completionsAccess is the batch completion route's access: only the
// agent in the path, proven by its own credential. `make mutants` builds
// a mutant (tag mutant_completions_open) that drops the credential check,
// which TestAgentCannotActAsAnotherAgent must catch; no shipped build
// sets that tag (scripts/mutants.sh).
const completionsAccess = AccessAgentSelf

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vigil-sched/vigil/state"
)

// The CLI's state lists come from package state: --state accepts exactly
// the run states, and compact counts rank every TI state once.
func TestCLIStateListsMatchStatePackage(t *testing.T) {
	assert.Equal(t, state.Strings(state.RunStates()), runStateNames)
	assert.ElementsMatch(t, state.TIStates(), stateOrder)
	for _, s := range state.RunStates() {
		assert.Equal(t, s.Terminal(), runTerminal(string(s)), s)
	}
	assert.Equal(t, "success=2 failed=1 running=1 none=3",
		fmtCounts(map[string]int{"none": 3, "running": 1, "failed": 1, "success": 2}))
}

package store

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vigil-sched/vigil/state"
)

// sqlList returns the quoted values of a SQL list such as ('a','b').
func sqlList(list string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`'([^']*)'`).FindAllStringSubmatch(list, -1) {
		out = append(out, m[1])
	}
	return out
}

// The SQL lists of terminal states the store's statements share agree with
// package state's predicates.
func TestTerminalSQLListsMatchStatePackage(t *testing.T) {
	var ti, run []string
	for _, s := range state.TIStates() {
		if s.Terminal() {
			ti = append(ti, string(s))
		}
	}
	for _, s := range state.RunStates() {
		if s.Terminal() {
			run = append(run, string(s))
		}
	}
	assert.ElementsMatch(t, ti, sqlList(tiTerminalSQL))
	assert.ElementsMatch(t, run, sqlList(runTerminalSQL))
}

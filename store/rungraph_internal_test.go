package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/trigger"
)

// diamond is a -> {b, c} -> d, plus e after c: each node's state given.
func diamond(states map[string]state.TI) runGraph {
	up := map[string][]string{"b": {"a"}, "c": {"a"}, "d": {"b", "c"}, "e": {"c"}}
	var nodes []*tiNode
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		s := states[id]
		if s == "" {
			s = state.TISuccess
		}
		nodes = append(nodes, &tiNode{id: int64(i + 1), taskID: id, state: s, upstream: up[id], tryNumber: 1})
	}
	return newRunGraph(nodes)
}

func taskIDs(cs []ClearedTI) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.TaskID)
	}
	return out
}

// The selection: named tasks, widened downstream and upstream from the
// names only (not the upstream of a downstream task), narrowed by
// only-failed; pending TIs are left alone.
func TestPlanClearSelection(t *testing.T) {
	g := diamond(map[string]state.TI{"c": state.TIFailed, "d": state.TIUpstreamFailed, "e": state.TIUpstreamFailed})
	for _, c := range []struct {
		name string
		req  ClearRequest
		want []string
	}{
		{"default", ClearRequest{}, []string{"c", "d", "e"}},
		{"one task re-derives what only it blocked", ClearRequest{TaskIDs: []string{"c"}}, []string{"c", "d", "e"}},
		{"a success task alone", ClearRequest{TaskIDs: []string{"b"}}, []string{"b"}},
		{"downstream", ClearRequest{TaskIDs: []string{"b"}, Downstream: true}, []string{"b", "d"}},
		{"upstream, and e re-derived with c", ClearRequest{TaskIDs: []string{"d"}, Upstream: true}, []string{"a", "b", "c", "d", "e"}},
		{"downstream and upstream from the names", ClearRequest{TaskIDs: []string{"b"}, Downstream: true, Upstream: true},
			[]string{"a", "b", "d"}},
		{"only failed", ClearRequest{TaskIDs: []string{"a"}, Downstream: true, OnlyFailed: true}, []string{"c", "d", "e"}},
	} {
		got, err := planClear(g, c.req)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, taskIDs(got), c.name)
	}
}

// An upstream_failed TI that another failure still blocks stays: d
// depends on b (failed, not cleared) and c (cleared).
func TestReopenableKeepsWhatAnotherFailureBlocks(t *testing.T) {
	g := diamond(map[string]state.TI{"b": state.TIFailed, "c": state.TIFailed, "d": state.TIUpstreamFailed, "e": state.TIUpstreamFailed})
	assert.Equal(t, map[string]bool{"e": true}, g.reopenable(map[string]bool{"c": true}, state.TINone))
	assert.Equal(t, map[string]bool{"d": true, "e": true}, g.reopenable(map[string]bool{"b": true, "c": true}, state.TINone))
}

// Re-derivation judges by each TI's trigger rule (trigger.Decide): a TI
// the scheduler ended by its rule returns to none when the roots' new end
// may decide it otherwise, and stays when its rule still ends it so.
func TestReopenableFollowsTriggerRules(t *testing.T) {
	// a -> {cleanup all_done, alert one_failed, load, join none_failed};
	// k is skipped by its exit code, a dependent of a.
	build := func(a state.TI, states map[string]state.TI) runGraph {
		var nodes []*tiNode
		for i, n := range []struct {
			id   string
			rule trigger.Rule
		}{{"a", ""}, {"cleanup", trigger.AllDone}, {"alert", trigger.OneFailed}, {"load", ""}, {"join", trigger.NoneFailed}, {"k", ""}} {
			s, reason := states[n.id], state.Reason("")
			switch {
			case n.id == "a":
				s = a
			case s == state.TISkipped && n.id == "k":
				reason = state.ReasonSkipExitCode
			case s == state.TISkipped:
				reason = state.ReasonTriggerRule
			}
			var up []string
			if n.id != "a" {
				up = []string{"a"}
			}
			nodes = append(nodes, &tiNode{id: int64(i + 1), taskID: n.id, state: s, reason: reason, rule: n.rule, upstream: up, tryNumber: 1})
		}
		return newRunGraph(nodes)
	}
	roots := map[string]bool{"a": true}

	// a succeeded: alert was skipped by its rule; marking a failed makes
	// one_failed runnable, while the all_done cleanup already ran.
	g := build(state.TISuccess, map[string]state.TI{"cleanup": state.TISuccess, "alert": state.TISkipped,
		"load": state.TISuccess, "join": state.TISuccess, "k": state.TISkipped})
	assert.Equal(t, map[string]bool{"alert": true}, g.reopenable(roots, state.TIFailed))
	assert.Empty(t, g.reopenable(roots, state.TISuccess), "a success again decides nothing new")

	// a failed: load and join are upstream_failed; a success (late, or
	// marked) or a clear reopens both; cleanup and alert ran, and stay.
	g = build(state.TIFailed, map[string]state.TI{"cleanup": state.TISuccess, "alert": state.TISuccess,
		"load": state.TIUpstreamFailed, "join": state.TIUpstreamFailed, "k": state.TISkipped})
	assert.Equal(t, map[string]bool{"load": true, "join": true}, g.reopenable(roots, state.TISuccess))
	assert.Equal(t, map[string]bool{"load": true, "join": true}, g.reopenable(roots, state.TINone))

	// a skipped: load skipped by all_success; marking a failed turns
	// that into upstream_failed, so load is reopened; join (none_failed)
	// ran. k skipped itself and is never re-derived.
	g = build(state.TISkipped, map[string]state.TI{"cleanup": state.TISuccess, "alert": state.TISkipped,
		"load": state.TISkipped, "join": state.TISuccess, "k": state.TISkipped})
	assert.Equal(t, map[string]bool{"load": true, "alert": true}, g.reopenable(roots, state.TIFailed))
	assert.Equal(t, map[string]bool{"load": true, "alert": true}, g.reopenable(roots, state.TINone))
	assert.Empty(t, g.reopenable(map[string]bool{"k": true}, state.TINone), "k has no dependents")
}

// A pending TI in the selection is left alone; a dispatched one is
// refused, named with its try.
func TestPlanClearRefusesDispatched(t *testing.T) {
	g := diamond(map[string]state.TI{"b": state.TIQueued, "c": state.TIRunning, "d": state.TINone, "e": state.TINone})
	_, err := planClear(g, ClearRequest{RunID: 3, TaskIDs: []string{"a"}, Downstream: true})
	assert.ErrorIs(t, err, ErrConflict)
	assert.ErrorContains(t, err, "run 3 an agent holds cannot be cleared: b is queued (try 1), c is running (try 1)")
	got, err := planClear(g, ClearRequest{TaskIDs: []string{"a", "d"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, taskIDs(got))
}

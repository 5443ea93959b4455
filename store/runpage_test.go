package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// A run's TIs come a page at a time in task id order (the run's key),
// each page's cursor the task id of its last TI, the last page without
// one; each TI carries its place in the DAG; the pages together are
// GetRun's list; every page's counts count the whole run.
func TestGetRunPageWalksTheRunByTaskID(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(fmt.Sprintf(chainYAML, 0)) // a -> b -> c, and d: declared a, b, c, d
	e.apply("dag_id: five\ntasks:\n" +
		"  - id: z\n    command: [\"true\"]\n  - id: y\n    command: [\"true\"]\n" +
		"  - id: x\n    command: [\"true\"]\n  - id: w\n    command: [\"true\"]\n  - id: v\n    command: [\"true\"]\n")
	e.trigger("chain") // another run's TIs must not leak into the pages
	runID := e.trigger("five")

	var got []string
	var cursors []any
	after := ""
	for range 5 {
		p, err := e.st.GetRunPage(e.ctx, runID, after, 2)
		require.NoError(t, err)
		assert.Equal(t, runID, p.ID)
		assert.Equal(t, map[state.TI]int{state.TINone: 5}, p.TaskCounts, "the counts are the whole run's")
		for _, ti := range p.TaskInstances {
			got = append(got, fmt.Sprintf("%s@%d", ti.TaskID, ti.Ordinal))
		}
		if p.NextCursor == nil {
			cursors = append(cursors, nil)
			break
		}
		cursors = append(cursors, *p.NextCursor)
		after = *p.NextCursor
	}
	assert.Equal(t, []string{"v@4", "w@3", "x@2", "y@1", "z@0"}, got)
	assert.Equal(t, []any{"w", "y", nil}, cursors)

	whole, err := e.st.GetRun(e.ctx, runID)
	require.NoError(t, err)
	exact, err := e.st.GetRunPage(e.ctx, runID, "", 5)
	require.NoError(t, err)
	assert.ElementsMatch(t, whole.TaskInstances, exact.TaskInstances, "one page of the run's width is GetRun's list")
	assert.Nil(t, exact.NextCursor, "a page that ends exactly at the last TI has no next one")

	past, err := e.st.GetRunPage(e.ctx, runID, "z", 2)
	require.NoError(t, err)
	assert.NotNil(t, past.TaskInstances)
	assert.Empty(t, past.TaskInstances)
	assert.Nil(t, past.NextCursor)
}

// A bad limit is an error naming the value; a missing run is ErrNotFound.
func TestGetRunPageRejectsBadArguments(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(fmt.Sprintf(chainYAML, 0))
	runID := e.trigger("chain")
	for _, limit := range []int{0, store.TIsPageMax + 1} {
		_, err := e.st.GetRunPage(e.ctx, runID, "", limit)
		require.Error(t, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("limit %d must be in 1..%d", limit, store.TIsPageMax))
	}
	_, err := e.st.GetRunPage(e.ctx, runID+1000, "", 10)
	assert.True(t, errors.Is(err, store.ErrNotFound), "%v", err)
}

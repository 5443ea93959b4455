package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// ListStaleQueued returns at most limit TIs, oldest first, of the kind
// asked for (uncovered here: no agent offers gpu), and all of them when
// fewer match; none when the covered ones are asked for.
func TestListStaleQueuedHonoursItsLimit(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply("dag_id: gpu\ntasks:\n" +
		"  - id: a\n    command: [\"true\"]\n    tags: [gpu]\n" +
		"  - id: b\n    command: [\"true\"]\n    tags: [gpu]\n" +
		"  - id: c\n    command: [\"true\"]\n    tags: [gpu]\n")
	_, err := e.st.TriggerRun(e.ctx, "gpu")
	require.NoError(t, err)
	_, err = e.st.ScheduleDirty(e.ctx, 1, 100)
	require.NoError(t, err)
	_, err = e.raw.Exec(e.ctx, `UPDATE task_instances SET queued_at = now() - interval '1 hour' + ordinal * interval '1 s'`)
	require.NoError(t, err)
	now := e.dbNow()

	two, err := e.st.ListStaleQueued(e.ctx, now, time.Minute, time.Minute, 2, false)
	require.NoError(t, err)
	require.Len(t, two, 2, "the limit")
	assert.True(t, two[0].QueuedAt.Before(two[1].QueuedAt), "oldest first")
	all, err := e.st.ListStaleQueued(e.ctx, now, time.Minute, time.Minute, 5, false)
	require.NoError(t, err)
	assert.Len(t, all, 3)
	covered, err := e.st.ListStaleQueued(e.ctx, now, time.Minute, time.Minute, 5, true)
	require.NoError(t, err)
	assert.Empty(t, covered)
}

// The walks go on past full pages (staleQueuedPage, 100): an uncovered TI
// queued behind 150 covered ones is still listed, and the backlog count
// (StaleBacklog) counts all 150.
func TestListStaleQueuedWalksPastAPageOfTheOtherKind(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	var b strings.Builder
	b.WriteString("dag_id: wide\nmax_active_tasks: 200\ntasks:\n")
	for i := range 150 {
		fmt.Fprintf(&b, "  - id: t%03d\n    command: [\"true\"]\n    tags: [linux]\n", i)
	}
	e.apply(b.String())
	e.apply("dag_id: gpu\ntasks:\n  - id: g\n    command: [\"true\"]\n    tags: [gpu]\n")
	for _, dagID := range []string{"wide", "gpu"} {
		_, err := e.st.TriggerRun(e.ctx, dagID)
		require.NoError(t, err)
	}
	_, err := e.st.ScheduleDirty(e.ctx, 1, 100)
	require.NoError(t, err)
	storetest.Agent(t, e.st, store.Registration{Name: "linux", Tags: []string{"linux"}, Capacity: 1})
	_, err = e.raw.Exec(e.ctx, `UPDATE task_instances SET queued_at = CASE dag_id
		WHEN 'wide' THEN now() - interval '1 hour' + ordinal * interval '1 s' ELSE now() - interval '30 minutes' END`)
	require.NoError(t, err)
	now := e.dbNow()

	covered, err := e.st.ListStaleQueued(e.ctx, now, time.Minute, time.Hour, 200, true)
	require.NoError(t, err)
	require.Len(t, covered, 150, "the linux agent covers the wide DAG's TIs")
	uncovered, err := e.st.ListStaleQueued(e.ctx, now, time.Minute, time.Hour, 5, false)
	require.NoError(t, err)
	require.Len(t, uncovered, 1)
	assert.Equal(t, "g", uncovered[0].TaskID)
	pools, err := e.st.StaleBacklog(e.ctx, now, time.Minute, time.Hour)
	require.NoError(t, err)
	require.Len(t, pools, 1)
	assert.Equal(t, 150, pools[0].Count)
}

// StaleBacklog walks at most store.BacklogCountCap stale queued TIs, a
// whole number of pages: with a page more queued than that, the count
// saturates at exactly the cap, not a page past it.
func TestStaleBacklogSaturatesAtItsCap(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply("dag_id: deep\ntasks:\n  - id: t0\n    command: [\"true\"]\n    tags: [linux]\n")
	run, err := e.st.TriggerRun(e.ctx, "deep")
	require.NoError(t, err)
	over := store.BacklogCountCap + 150
	_, err = e.raw.Exec(e.ctx, `
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, command, state, queued_at, required_tags)
		SELECT $1, 'deep', 'x' || g, g, '{true}', 'queued', now() - interval '1 hour' + g * interval '1 ms', '{linux}'
		  FROM generate_series(1, $2) g`, run.ID, over)
	require.NoError(t, err)
	storetest.Agent(t, e.st, store.Registration{Name: "linux", Tags: []string{"linux"}, Capacity: 1})
	now := e.dbNow()

	pools, err := e.st.StaleBacklog(e.ctx, now, time.Minute, time.Hour)
	require.NoError(t, err)
	require.Len(t, pools, 1)
	assert.Equal(t, store.BacklogCountCap, pools[0].Count, "%d stale queued TIs, counted up to the cap", over)
}

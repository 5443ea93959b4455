package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	var now time.Time
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT now()`).Scan(&now))

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

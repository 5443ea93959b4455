package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// FinalizeOrphan ends a running run with no active TI and records why
// on the run: a run whose TIs are not all terminal fails, reason
// orphaned, its none TIs with it (orphan_reaped); one whose TIs are all
// terminal is finalized the normal way (orphan_finalized). Each event's
// message names the run's end. A candidate that changed since it was
// listed is left alone and records nothing.
func TestFinalizeOrphanRecordsItsDecisionOnTheRun(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply("dag_id: stuck\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	pending := e.trigger("stuck")
	ended := e.trigger("stuck")
	_, err := e.st.StartQueuedRuns(e.ctx, 1)
	require.NoError(t, err)
	// Both runs running with no active TI: one's TI still none (never
	// queued), the other's already succeeded, both quiet for an hour.
	_, err = e.raw.Exec(e.ctx, `UPDATE task_instances SET state = 'success', end_date = now() WHERE run_id = $1`, ended)
	require.NoError(t, err)
	_, err = e.raw.Exec(e.ctx, `
		WITH r AS (UPDATE runs SET updated_at = now() - interval '1 hour', idle_since = now() - interval '1 hour' RETURNING id)
		UPDATE task_instances SET updated_at = now() - interval '1 hour' WHERE run_id IN (SELECT id FROM r)`)
	require.NoError(t, err)
	now := e.dbNow()

	orphans, err := e.st.ListOrphanRuns(e.ctx, now, time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, orphans, 2)
	byRun := map[int64]store.OrphanRun{}
	for _, o := range orphans {
		byRun[o.RunID] = o
	}
	// Each run's events of its decision and of its TIs' failures: the
	// refused finalization wrote none of either.
	want := map[int64]struct {
		run    state.Run
		kind   state.EventKind
		failed []string
	}{
		pending: {state.RunFailed, state.EventOrphanReaped, []string{"a: nothing left to do"}},
		ended:   {state.RunSuccess, state.EventOrphanFinalized, nil},
	}
	for runID, w := range want {
		c := byRun[runID]
		require.Equal(t, runID, c.RunID, "run %d listed", runID)
		stale := c
		stale.LastChange = c.LastChange.Add(-time.Second)
		got, err := e.st.FinalizeOrphan(e.ctx, 1, stale, "a changed candidate")
		require.NoError(t, err)
		assert.Empty(t, got, "run %d: a candidate whose last change moved is left alone", runID)

		got, err = e.st.FinalizeOrphan(e.ctx, 1, c, "nothing left to do")
		require.NoError(t, err)
		assert.Equal(t, w.run, got, "run %d", runID)
		assert.Equal(t, []string{"run: nothing left to do (run " + string(w.run) + ")"}, e.eventMessages(runID, w.kind),
			"run %d: its %s event", runID, w.kind)
		assert.Equal(t, w.failed, e.eventMessages(runID, state.EventTIFailed), "run %d: its TIs' ti_failed events", runID)
		assert.Zero(t, e.count(`SELECT count(*) FROM events WHERE run_id = $1 AND message LIKE '%a changed candidate%'`, runID),
			"run %d: the refused finalization wrote an event", runID)
	}
}

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
	var now time.Time
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT now()`).Scan(&now))

	orphans, err := e.st.ListOrphanRuns(e.ctx, now, time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, orphans, 2)
	byRun := map[int64]store.OrphanRun{}
	for _, o := range orphans {
		byRun[o.RunID] = o
	}
	want := map[int64]struct {
		run  state.Run
		kind state.EventKind
	}{
		pending: {state.RunFailed, state.EventOrphanReaped},
		ended:   {state.RunSuccess, state.EventOrphanFinalized},
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
		evs, err := e.st.RunEvents(e.ctx, runID, 0)
		require.NoError(t, err)
		var msgs []string
		for _, ev := range evs {
			if ev.Kind == w.kind {
				msgs = append(msgs, ev.Message)
			}
			assert.NotEqual(t, "a changed candidate", ev.Message, "run %d: the refused finalization wrote an event", runID)
		}
		assert.Equal(t, []string{"nothing left to do (run " + string(w.run) + ")"}, msgs, "run %d: its %s event", runID, w.kind)
	}
}

package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
)

const backfillDAG = "dag_id: daily\nschedule: \"@daily\"\nstart_date: 2025-01-01T00:00:00Z\nmax_active_runs: 1\n" +
	"tasks:\n  - id: a\n    command: [\"true\"]\n"

func janDay(d int) time.Time { return time.Date(2025, 1, d, 0, 0, 0, 0, time.UTC) }

// A backfill creates one backfill run per slot in [from, to], with its
// logical date and data interval; a repeat, or an overlapping range,
// creates only the slots that have none yet.
func TestBackfillCreatesOneRunPerSlotIdempotently(t *testing.T) {
	e := newSchedEnv(t)
	e.apply(backfillDAG)

	res, err := e.st.Backfill(e.ctx, "daily", janDay(3), janDay(5).Add(12*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, 3, res.Slots)
	assert.Equal(t, 3, res.Created)
	assert.Equal(t, 0, res.Existing)
	require.Len(t, res.RunIDs, 3)
	for i, id := range res.RunIDs {
		var typ string
		var logical, start, end time.Time
		require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT run_type, logical_date, data_interval_start, data_interval_end
			FROM runs WHERE id = $1`, id).Scan(&typ, &logical, &start, &end))
		assert.Equal(t, store.RunBackfill, typ)
		assert.True(t, logical.Equal(janDay(3+i)), "oldest slot first")
		assert.True(t, start.Equal(janDay(3+i)))
		assert.True(t, end.Equal(janDay(4+i)))
		assert.Equal(t, 1, e.count(`SELECT count(*) FROM events WHERE run_id = $1 AND kind = 'backfill_created'`, id))
	}

	again, err := e.st.Backfill(e.ctx, "daily", janDay(3), janDay(5).Add(12*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, store.BackfillResult{DAGID: "daily", From: janDay(3), To: janDay(5).Add(12 * time.Hour), Slots: 3, Existing: 3}, again)

	overlap, err := e.st.Backfill(e.ctx, "daily", janDay(4).Add(time.Second), janDay(7))
	require.NoError(t, err)
	assert.Equal(t, 3, overlap.Slots, "slots 5, 6 and 7: from rounds up to the next slot, to is inclusive")
	assert.Equal(t, 2, overlap.Created)
	assert.Equal(t, 1, overlap.Existing)
	assert.Equal(t, 5, e.count(`SELECT count(*) FROM runs WHERE dag_id = 'daily' AND run_type = 'backfill'`))
	assert.Equal(t, 5, e.count(`SELECT count(DISTINCT logical_date) FROM runs WHERE dag_id = 'daily'`))
	require.Len(t, overlap.RunIDs, 2)
	assert.Equal(t, res.RunIDs[2]+1, overlap.RunIDs[0], "the repeat and the existing slot drew no run id")
	assert.Equal(t, overlap.RunIDs[0]+1, overlap.RunIDs[1])
	next := e.trigger("daily")
	assert.Equal(t, overlap.RunIDs[1]+1, next, "ids do not skip after repeated backfills")
}

// Backfill and scheduled runs have their own unique index: neither
// suppresses the other, and a manual run touches neither.
func TestBackfillAndScheduledSlotsDoNotCollide(t *testing.T) {
	e := newSchedEnv(t)
	e.apply(backfillDAG)
	e.trigger("daily")
	slot := store.Slot{LogicalDate: janDay(2), IntervalStart: janDay(2), IntervalEnd: janDay(3)}
	next := janDay(3)
	sched, err := e.st.CreateSlots(e.ctx, 1, store.SlotPlan{DAGID: "daily", Next: next, Slots: []store.Slot{slot}, MaxActiveRuns: 1})
	require.NoError(t, err)
	require.Equal(t, 1, sched.Created)

	res, err := e.st.Backfill(e.ctx, "daily", janDay(2), janDay(2))
	require.NoError(t, err)
	assert.Equal(t, 1, res.Created, "a scheduled run at the slot does not stop a backfill run")

	// The scheduled slot is still creatable-once: a second attempt finds it.
	sched, err = e.st.CreateSlots(e.ctx, 1, store.SlotPlan{DAGID: "daily", Expect: &next, Next: janDay(4),
		Slots: []store.Slot{slot}, MaxActiveRuns: 1})
	require.NoError(t, err)
	assert.Equal(t, 0, sched.Created)
	assert.Equal(t, 1, sched.Existing)
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM runs WHERE run_type = 'scheduled' AND logical_date = $1`, janDay(2)))
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM runs WHERE run_type = 'backfill' AND logical_date = $1`, janDay(2)))
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM runs WHERE run_type = 'manual'`))
}

// A paused DAG is backfilled; its backfill runs wait under
// max_active_runs like any other run of the DAG.
func TestBackfillOfAPausedDAGQueuesUnderMaxActiveRuns(t *testing.T) {
	e := newSchedEnv(t)
	e.apply(backfillDAG)
	_, err := e.st.SetPaused(e.ctx, "daily", true)
	require.NoError(t, err)
	res, err := e.st.Backfill(e.ctx, "daily", janDay(1), janDay(3))
	require.NoError(t, err)
	require.Equal(t, 3, res.Created)
	e.tick()
	assert.Equal(t, "running", e.runState(res.RunIDs[0]), "the oldest slot starts first")
	assert.Equal(t, "queued", e.runState(res.RunIDs[1]))
	assert.Equal(t, "queued", e.runState(res.RunIDs[2]))
}

// Bad ranges name the field and the rule and create nothing.
func TestBackfillRejectsBadRanges(t *testing.T) {
	e := newSchedEnv(t)
	e.apply(backfillDAG)
	e.apply("dag_id: fine\nschedule: \"@every 1s\"\nstart_date: 2025-01-01T00:00:00Z\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	e.apply("dag_id: adhoc\ntasks:\n  - id: a\n    command: [\"true\"]\n")

	cases := []struct {
		dagID    string
		from, to time.Time
		field    string
		rule     string
	}{
		{"daily", janDay(5), janDay(4), "from", "is after to"},
		{"daily", janDay(1), time.Now().Add(time.Hour), "to", "is in the future"},
		{"fine", janDay(1), janDay(1).Add(time.Hour), "to", "holds more than 1000 slots"},
	}
	for _, c := range cases {
		_, err := e.st.Backfill(e.ctx, c.dagID, c.from, c.to)
		var rangeErr *store.BackfillRangeError
		require.True(t, errors.As(err, &rangeErr), "%v", err)
		assert.Equal(t, c.field, rangeErr.Field)
		assert.Contains(t, rangeErr.Rule, c.rule)
		assert.Contains(t, err.Error(), `backfill of dag "`+c.dagID+`": `+c.field+": ")
	}
	_, err := e.st.Backfill(e.ctx, "adhoc", janDay(1), janDay(2))
	require.ErrorIs(t, err, store.ErrConflict)
	assert.Contains(t, err.Error(), "has no schedule")
	_, err = e.st.Backfill(e.ctx, "nope", janDay(1), janDay(2))
	require.ErrorIs(t, err, store.ErrNotFound)
	assert.Equal(t, 0, e.count(`SELECT count(*) FROM runs`), "nothing half-written")

	// Exactly the cap is accepted.
	res, err := e.st.Backfill(e.ctx, "fine", janDay(1), janDay(1).Add((store.BackfillMaxSlots-1)*time.Second))
	require.NoError(t, err)
	assert.Equal(t, store.BackfillMaxSlots, res.Created)
}

// Backfill and scheduled runs take the DAG's param defaults as their conf.
func TestSlotRunsTakeParamDefaults(t *testing.T) {
	e := newSchedEnv(t)
	e.apply("dag_id: p\nschedule: \"@daily\"\nstart_date: 2025-01-01T00:00:00Z\nparams:\n  region: {type: string, default: eu}\n" +
		"  limit: {type: int}\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	res, err := e.st.Backfill(e.ctx, "p", janDay(1), janDay(1))
	require.NoError(t, err)
	require.Len(t, res.RunIDs, 1)
	sched, err := e.st.CreateSlots(e.ctx, 1, store.SlotPlan{DAGID: "p", Next: janDay(3),
		Slots: []store.Slot{{LogicalDate: janDay(2), IntervalStart: janDay(2), IntervalEnd: janDay(3)}}})
	require.NoError(t, err)
	require.Len(t, sched.RunIDs, 1)
	for _, id := range []int64{res.RunIDs[0], sched.RunIDs[0]} {
		d, err := e.st.GetRun(e.ctx, id)
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"region": "eu"}, d.Conf)
	}
}

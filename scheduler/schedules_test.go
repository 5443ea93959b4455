package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/reaper/reapertest"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// schedEnv is a scheduler holding epoch 1 whose Clock is stepped by hand;
// tests call its Schedules pass directly.
type schedEnv struct {
	ctx   context.Context
	s     *Scheduler
	st    *store.Store
	db    *pgxpool.Pool
	clock *reapertest.Clock
}

func newSchedEnv(t *testing.T, now time.Time) *schedEnv {
	t.Helper()
	ctx := context.Background()
	url := storetest.DB(t)
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	db, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	e := &schedEnv{ctx: ctx, st: st, db: db, clock: reapertest.NewClock(now)}
	e.s, err = New(Config{Store: st, Metrics: metrics.New(), Clock: e.clock})
	require.NoError(t, err)
	require.NoError(t, st.AcquireFence(ctx, 1, "t"))
	return e
}

func (e *schedEnv) apply(t *testing.T, yaml string) {
	t.Helper()
	spec, err := dag.Parse([]byte(yaml + "tasks:\n  - id: a\n    command: [\"true\"]\n  - id: b\n    depends_on: [a]\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = e.st.ApplyDAG(e.ctx, spec)
	require.NoError(t, err)
}

func (e *schedEnv) pass(t *testing.T) int {
	t.Helper()
	n, err := e.s.Schedules(e.ctx, 1)
	require.NoError(t, err)
	return n
}

type slotRow struct {
	logical, start, end time.Time
	tis                 int
}

// slots returns the scheduled runs of dagID, oldest slot first.
func (e *schedEnv) slots(t *testing.T, dagID string) []slotRow {
	t.Helper()
	rows, err := e.db.Query(e.ctx, `
		SELECT logical_date, data_interval_start, data_interval_end,
		       (SELECT count(*) FROM task_instances ti WHERE ti.run_id = r.id)
		  FROM runs r WHERE dag_id = $1 AND run_type = 'scheduled' ORDER BY logical_date`, dagID)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (slotRow, error) {
		var s slotRow
		err := r.Scan(&s.logical, &s.start, &s.end, &s.tis)
		return s, err
	})
	require.NoError(t, err)
	return out
}

func (e *schedEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.QueryRow(e.ctx, sql, args...).Scan(&n))
	return n
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestSchedulesCatchupOldestFirstBoundedByMaxActiveRuns(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t, utc("2026-01-01T05:30:00Z"))
	e.apply(t, "dag_id: c\nschedule: \"0 * * * *\"\nstart_date: 2026-01-01T00:00:00Z\ncatchup: true\nmax_active_runs: 3\n")

	assert.Equal(t, 3, e.pass(t), "catchup: oldest first, up to max_active_runs")
	got := e.slots(t, "c")
	require.Len(t, got, 3)
	for i, s := range got {
		want := utc("2026-01-01T00:00:00Z").Add(time.Duration(i) * time.Hour)
		assert.Equal(t, want, s.logical.UTC())
		assert.Equal(t, want, s.start.UTC())
		assert.Equal(t, want.Add(time.Hour), s.end.UTC())
		assert.Equal(t, 2, s.tis, "the run has its TIs, as TriggerRun makes them")
	}
	assert.Equal(t, 3, e.count(t, `SELECT count(*) FROM run_dirty`), "the runs are dirty for the tick")
	assert.Equal(t, 3, e.count(t, `SELECT count(*) FROM events WHERE kind = 'slot_created'`))

	assert.Equal(t, 0, e.pass(t), "the DAG is at max_active_runs: catchup waits")
	_, err := e.db.Exec(e.ctx, `UPDATE runs SET state = 'success', end_date = now() WHERE dag_id = 'c'`)
	require.NoError(t, err)
	assert.Equal(t, 2, e.pass(t), "the 03:00 and 04:00 slots are due; 05:00 is not yet (its interval ends at 06:00)")
	assert.Len(t, e.slots(t, "c"), 5)
	e.clock.Add(time.Hour)
	assert.Equal(t, 1, e.pass(t))
	assert.Equal(t, utc("2026-01-01T05:00:00Z"), e.slots(t, "c")[5].logical.UTC())
}

func TestSchedulesNoCatchupOnlyLatestDueSlot(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t, utc("2026-01-01T05:30:00Z"))
	e.apply(t, "dag_id: n\nschedule: \"@hourly\"\nstart_date: 2026-01-01T00:00:00Z\n")

	assert.Equal(t, 1, e.pass(t))
	got := e.slots(t, "n")
	require.Len(t, got, 1)
	assert.Equal(t, utc("2026-01-01T04:00:00Z"), got[0].logical.UTC(), "only the latest due slot")
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM events WHERE kind = 'slots_skipped' AND message LIKE '%4 earlier%'`))
	assert.Equal(t, 0, e.pass(t))
	e.clock.Add(3 * time.Hour) // 08:30: 05:00, 06:00 and 07:00 are due
	assert.Equal(t, 1, e.pass(t))
	got = e.slots(t, "n")
	require.Len(t, got, 2)
	assert.Equal(t, utc("2026-01-01T07:00:00Z"), got[1].logical.UTC())
}

func TestSchedulesExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t, utc("2026-01-01T00:00:35Z"))
	e.apply(t, "dag_id: x\nschedule: \"@every 10s\"\nstart_date: 2026-01-01T00:00:00Z\ncatchup: true\n")

	assert.Equal(t, 3, e.pass(t), "slots 00, 10 and 20 are due at 35s")
	assert.Equal(t, 0, e.pass(t), "a second pass for the same slots creates nothing")

	// A leader that read the pointer before it moved (or a new leader
	// replaying from an older pointer) gets no second run per slot.
	_, err := e.db.Exec(e.ctx, `UPDATE dags SET next_slot = $1 WHERE dag_id = 'x'`, utc("2026-01-01T00:00:00Z"))
	require.NoError(t, err)
	assert.Equal(t, 0, e.pass(t))
	assert.Len(t, e.slots(t, "x"), 3)
	assert.Equal(t, 0, e.count(t, `SELECT count(*) FROM (SELECT logical_date FROM runs WHERE run_type = 'scheduled'
		GROUP BY dag_id, logical_date HAVING count(*) > 1) d`))

	// A stale plan (pointer moved since it was read) writes nothing.
	res, err := e.st.CreateSlots(e.ctx, 1, store.SlotPlan{DAGID: "x", Expect: nil, Next: utc("2030-01-01T00:00:00Z"),
		Slots: []store.Slot{{LogicalDate: utc("2026-01-01T00:00:30Z"), IntervalStart: utc("2026-01-01T00:00:30Z"),
			IntervalEnd: utc("2026-01-01T00:00:40Z")}}})
	require.NoError(t, err)
	assert.True(t, res.Stale)
	assert.Len(t, e.slots(t, "x"), 3)

	// A deposed leader's pass is fenced and writes nothing.
	e.clock.Add(time.Minute)
	_, err = e.s.Schedules(e.ctx, 0)
	require.True(t, store.IsFenced(err), "%v", err)
	assert.Len(t, e.slots(t, "x"), 3)
}

func TestSchedulesManualRunAtSlotDoesNotSuppressIt(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t, utc("2026-01-01T01:30:00Z"))
	e.apply(t, "dag_id: m\nschedule: \"@hourly\"\nstart_date: 2026-01-01T00:00:00Z\ncatchup: true\n")
	manual, err := e.st.TriggerRun(e.ctx, "m")
	require.NoError(t, err)
	// Manual and backfill runs at the slot's logical date are outside the
	// scheduled-slot index.
	_, err = e.db.Exec(e.ctx, `UPDATE runs SET logical_date = $2 WHERE id = $1`, manual.ID, utc("2026-01-01T00:00:00Z"))
	require.NoError(t, err)
	bf, err := e.st.Backfill(e.ctx, "m", utc("2026-01-01T00:00:00Z"), utc("2026-01-01T00:00:00Z"))
	require.NoError(t, err)
	require.Equal(t, 1, bf.Created)

	assert.Equal(t, 1, e.pass(t))
	got := e.slots(t, "m")
	require.Len(t, got, 1)
	assert.Equal(t, utc("2026-01-01T00:00:00Z"), got[0].logical.UTC())
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM runs WHERE id = $1 AND run_type = 'manual'`, manual.ID))
	assert.Equal(t, store.RunManual, manual.RunType)
	runs, err := e.st.ListRuns(e.ctx, "", "m", 10)
	require.NoError(t, err)
	require.Len(t, runs, 3)
	assert.Equal(t, store.RunScheduled, runs[0].RunType, "newest first: the scheduled run")
	require.NotNil(t, runs[0].LogicalDate)
	assert.Equal(t, utc("2026-01-01T00:00:00Z"), runs[0].LogicalDate.UTC())
	assert.Equal(t, utc("2026-01-01T01:00:00Z"), runs[0].IntervalEnd.UTC())
}

func TestSchedulesDSTEuropeBerlin(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t, utc("2026-03-30T12:00:00Z"))
	e.apply(t, "dag_id: b\nschedule: \"@daily\"\ntimezone: Europe/Berlin\nstart_date: 2026-03-27T00:00:00+01:00\ncatchup: true\n")

	assert.Equal(t, 3, e.pass(t))
	got := e.slots(t, "b")
	require.Len(t, got, 3)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	for i, day := range []int{27, 28, 29} {
		assert.Equal(t, time.Date(2026, 3, day, 0, 0, 0, 0, berlin), got[i].logical.In(berlin), "midnight local time")
	}
	assert.Equal(t, 24*time.Hour, got[1].end.Sub(got[1].start))
	assert.Equal(t, 23*time.Hour, got[2].end.Sub(got[2].start), "29 March, the day of the change, is 23 hours long")
	assert.Equal(t, utc("2026-03-29T22:00:00Z"), got[2].end.UTC())
}

func TestSchedulesEndDate(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t, utc("2026-01-01T10:00:00Z"))
	e.apply(t, "dag_id: e\nschedule: \"@hourly\"\nstart_date: 2026-01-01T00:00:00Z\nend_date: 2026-01-01T02:00:00Z\ncatchup: true\n")

	assert.Equal(t, 3, e.pass(t), "00:00, 01:00 and 02:00; none after end_date")
	e.clock.Add(24 * time.Hour)
	assert.Equal(t, 0, e.pass(t))
	assert.Len(t, e.slots(t, "e"), 3)
}

func TestSchedulesPausedCreatesNothing(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t, utc("2026-01-01T10:00:00Z"))
	e.apply(t, "dag_id: p\nschedule: \"@hourly\"\nstart_date: 2026-01-01T00:00:00Z\npaused: true\n")
	assert.Equal(t, 0, e.pass(t))
	assert.Empty(t, e.slots(t, "p"))
}

func TestMaxActiveRunsHoldsRunsInQueued(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t, utc("2026-01-01T00:30:00Z"))
	e.apply(t, "dag_id: h\nschedule: \"@hourly\"\nstart_date: 2026-01-01T00:00:00Z\nmax_active_runs: 1\npaused: true\n")
	first, err := e.st.TriggerRun(e.ctx, "h")
	require.NoError(t, err)
	second, err := e.st.TriggerRun(e.ctx, "h")
	require.NoError(t, err)

	res, err := e.st.ScheduleDirty(e.ctx, 1, 100)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Started, "max_active_runs 1: the second run waits")
	runState := func(id int64) state.Run {
		d, err := e.st.GetRun(e.ctx, id)
		require.NoError(t, err)
		return d.Run.State
	}
	assert.Equal(t, state.RunRunning, runState(first.ID))
	assert.Equal(t, state.RunQueued, runState(second.ID))
	res, err = e.st.ScheduleDirty(e.ctx, 1, 100)
	require.NoError(t, err)
	assert.Equal(t, 0, res.Started)

	_, err = e.st.CancelRun(e.ctx, first.ID, state.ReasonCancelled, "test")
	require.NoError(t, err)
	_, err = e.st.ScheduleDirty(e.ctx, 1, 100)
	require.NoError(t, err)
	assert.Equal(t, state.RunRunning, runState(second.ID), "a place opened: the held run starts")

	// A scheduled slot created while the DAG is at its cap is held, with an event.
	_, err = e.db.Exec(e.ctx, `UPDATE dags SET paused = false WHERE dag_id = 'h'`)
	require.NoError(t, err)
	e.clock.Add(time.Hour)
	assert.Equal(t, 1, e.pass(t))
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM events WHERE kind = 'slot_held'`))
	_, err = e.st.ScheduleDirty(e.ctx, 1, 100)
	require.NoError(t, err)
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM runs WHERE dag_id = 'h' AND run_type = 'scheduled' AND state = 'queued'`))
}

func TestUnscheduledDAGHasNoRunCap(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t, utc("2026-01-01T00:00:00Z"))
	e.apply(t, "dag_id: u\n")
	for range 20 {
		_, err := e.st.TriggerRun(e.ctx, "u")
		require.NoError(t, err)
	}
	res, err := e.st.ScheduleDirty(e.ctx, 1, 100)
	require.NoError(t, err)
	assert.Equal(t, 20, res.Started)
}

func TestSchedulesNoCatchupFastForwardsEvery(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t, utc("2026-01-01T00:10:05Z"))
	e.apply(t, "dag_id: f\nschedule: \"@every 10s\"\nstart_date: 2026-01-01T00:00:00Z\n")
	e.apply(t, "dag_id: g\nschedule: \"@every 10s\"\nstart_date: 2026-01-01T00:00:00Z\nend_date: 2026-01-01T00:05:00Z\n")

	assert.Equal(t, 2, e.pass(t))
	got := e.slots(t, "f")
	require.Len(t, got, 1)
	assert.Equal(t, utc("2026-01-01T00:09:50Z"), got[0].logical.UTC(), "the latest due slot")
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM events WHERE kind = 'slots_skipped' AND message LIKE '%59 earlier%'`))
	got = e.slots(t, "g")
	require.Len(t, got, 1)
	assert.Equal(t, utc("2026-01-01T00:05:00Z"), got[0].logical.UTC(), "the last slot before end_date")
	e.clock.Add(time.Hour)
	assert.Equal(t, 1, e.pass(t), "f's latest slot only; g has ended")
}

// The schedules service runs while leading: a due slot becomes a run, and
// the tick starts it.
func TestSchedulesServiceRunsWhileLeading(t *testing.T) {
	t.Parallel()
	e := startLeading(t, reaper.Thresholds{AgentLost: time.Hour, DispatchLost: time.Hour, Orphan: time.Hour}, nil)
	now, err := e.clock.Now(e.ctx)
	require.NoError(t, err)
	start := now.UTC().Truncate(time.Second).Add(-time.Minute).Format(time.RFC3339)
	spec, err := dag.Parse([]byte("dag_id: sv\nschedule: \"@every 10s\"\nstart_date: " + start + "\ntasks:\n  - id: a\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = e.st.ApplyDAG(e.ctx, spec)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		runs, err := e.st.ListRuns(e.ctx, state.RunRunning, "sv", 10)
		return err == nil && len(runs) == 1 && runs[0].RunType == store.RunScheduled
	}, 5*time.Second, 10*time.Millisecond, "the latest due slot's run is created and started")
	e.clock.Add(10 * time.Second)
	require.Eventually(t, func() bool {
		runs, err := e.st.ListRuns(e.ctx, "", "sv", 10)
		return err == nil && len(runs) == 2
	}, 5*time.Second, 10*time.Millisecond, "the next slot follows when the clock moves")
}

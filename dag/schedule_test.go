package dag

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const schedTasks = "tasks:\n  - id: a\n    command: [\"true\"]\n"

func TestScheduleFieldsParse(t *testing.T) {
	spec, err := Parse([]byte("dag_id: s\nschedule: \"@daily\"\ntimezone: Europe/Berlin\n" +
		"start_date: 2026-03-01T00:00:00+01:00\nend_date: \"2026-04-01T00:00:00Z\"\ncatchup: true\nmax_active_runs: 2\npaused: true\n" + schedTasks))
	require.NoError(t, err)
	assert.Equal(t, "@daily", spec.Schedule)
	assert.Equal(t, "2026-03-01T00:00:00+01:00", spec.StartDate)
	assert.Equal(t, "2026-04-01T00:00:00Z", spec.EndDate)
	assert.True(t, spec.Catchup)
	assert.True(t, spec.Paused)
	assert.Equal(t, 2, spec.EffectiveMaxActiveRuns())

	plain, err := Parse([]byte("dag_id: p\n" + schedTasks))
	require.NoError(t, err)
	assert.Equal(t, 0, plain.EffectiveMaxActiveRuns(), "no cap without a schedule")
	spec.MaxActiveRuns = 0
	assert.Equal(t, DefaultMaxActiveRuns, spec.EffectiveMaxActiveRuns())
}

func TestScheduleValidation(t *testing.T) {
	cases := []struct {
		fields string
		want   string
	}{
		{"schedule: \"61 * * * *\"\nstart_date: 2026-01-01T00:00:00Z\n", `dag "s": schedule: "61 * * * *": must be five cron fields`},
		{"schedule: \"@every 500ms\"\nstart_date: 2026-01-01T00:00:00Z\n", `dag "s": schedule: "@every 500ms": the duration must be a whole number of seconds, at least 1s`},
		{"schedule: \"CRON_TZ=UTC 0 * * * *\"\nstart_date: 2026-01-01T00:00:00Z\n", `dag "s": schedule: a TZ= or CRON_TZ= prefix is not allowed`},
		{"schedule: \"@daily\"\n", `dag "s": start_date: required with a schedule`},
		{"schedule: \"@daily\"\nstart_date: \"2026-01-01\"\n", `dag "s": start_date: "2026-01-01" is not an RFC 3339 time`},
		{"schedule: \"@daily\"\nstart_date: 2026-01-02T00:00:00Z\nend_date: 2026-01-01T00:00:00Z\n", `dag "s": end_date: must not be before start_date`},
		{"schedule: \"@daily\"\nstart_date: 2026-01-01T00:00:00Z\ntimezone: Mars/Olympus\n", `dag "s": timezone: unknown IANA time zone "Mars/Olympus"`},
		{"schedule: \"@daily\"\nstart_date: 2026-01-01T00:00:00Z\nmax_active_runs: -1\n", `dag "s": max_active_runs: must be between 1 and 10000`},
		{"catchup: true\n", `dag "s": catchup: only allowed with a schedule`},
		{"start_date: 2026-01-01T00:00:00Z\n", `dag "s": start_date: only allowed with a schedule`},
	}
	for _, c := range cases {
		_, err := Parse([]byte("dag_id: s\n" + c.fields + schedTasks))
		require.Error(t, err, c.fields)
		assert.Contains(t, err.Error(), c.want, c.fields)
	}
	for _, ok := range []string{"*/5 * * * *", "@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@every 10s", "30 2 * * 1-5"} {
		_, err := Parse([]byte("dag_id: s\nschedule: \"" + ok + "\"\nstart_date: 2026-01-01T00:00:00Z\n" + schedTasks))
		assert.NoError(t, err, ok)
	}
}

func TestSlotsDST(t *testing.T) {
	spec := &Spec{DAGID: "s", Schedule: "@daily", Timezone: "Europe/Berlin", StartDate: "2026-03-28T00:00:00+01:00"}
	sl, err := spec.Slots()
	require.NoError(t, err)
	first := sl.First()
	assert.Equal(t, time.Date(2026, 3, 27, 23, 0, 0, 0, time.UTC), first)
	second := sl.Next(first)
	assert.Equal(t, time.Date(2026, 3, 28, 23, 0, 0, 0, time.UTC), second)
	third := sl.Next(second) // 30 March 00:00 CEST: the night of the change is 23 hours long
	assert.Equal(t, time.Date(2026, 3, 29, 22, 0, 0, 0, time.UTC), third)
	assert.Equal(t, 23*time.Hour, third.Sub(second))
}

func TestSlotsEveryAndEnd(t *testing.T) {
	spec := &Spec{DAGID: "s", Schedule: "@every 10s", StartDate: "2026-01-01T00:00:00.5Z", EndDate: "2026-01-01T00:00:20Z"}
	sl, err := spec.Slots()
	require.NoError(t, err)
	first := sl.First()
	assert.Equal(t, time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), first)
	assert.False(t, sl.Ended(sl.Next(first)))
	assert.True(t, sl.Ended(sl.Next(sl.Next(first))))
	cronSpec := &Spec{DAGID: "s", Schedule: "0 * * * *", StartDate: "2026-01-01T00:00:00Z"}
	sl, err = cronSpec.Slots()
	require.NoError(t, err)
	assert.Equal(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), sl.First(), "start_date on a slot is that slot")
	_, err = (&Spec{Schedule: "@daily"}).Slots()
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "start_date:"))
}

func TestSlotsFrom(t *testing.T) {
	every := &Spec{DAGID: "s", Schedule: "@every 10s", StartDate: "2026-01-01T00:00:00Z"}
	sl, err := every.Slots()
	require.NoError(t, err)
	at := func(sec int) time.Time { return time.Date(2026, 1, 1, 0, 0, sec, 0, time.UTC) }
	assert.Equal(t, at(0), sl.From(at(0).Add(-time.Hour)), "before start_date: the first slot")
	assert.Equal(t, at(20), sl.From(at(20)), "on a slot: that slot")
	assert.Equal(t, at(30), sl.From(at(20).Add(time.Nanosecond)), "just after a slot: the next one")

	daily := &Spec{DAGID: "s", Schedule: "@daily", Timezone: "Europe/Berlin", StartDate: "2026-03-28T00:00:00+01:00"}
	sl, err = daily.Slots()
	require.NoError(t, err)
	assert.Equal(t, time.Date(2026, 3, 28, 23, 0, 0, 0, time.UTC), sl.From(time.Date(2026, 3, 28, 23, 0, 0, 0, time.UTC)))
	assert.Equal(t, time.Date(2026, 3, 29, 22, 0, 0, 0, time.UTC), sl.From(time.Date(2026, 3, 28, 23, 0, 0, 1, time.UTC)),
		"the next Berlin midnight, across the DST change")
}

package dag

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser reads the five standard cron fields and the descriptors
// (@hourly, @daily, @weekly, @monthly, @yearly, @every DURATION); see
// adr/0017-schedules.md for why robfig/cron.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Slots is a DAG's parsed schedule: the logical dates of its slots, in
// its timezone. Build it with Spec.Slots.
type Slots struct {
	sched cron.Schedule
	every time.Duration // > 0 for "@every"
	loc   *time.Location
	// Start is the spec's start_date: no slot is before it.
	Start time.Time
	// End is the spec's end_date (zero: none): no slot is after it.
	End time.Time
}

// Slots parses the schedule fields of s. It returns nil and no error when
// s has no schedule; errors name the field and the rule.
func (s *Spec) Slots() (*Slots, error) {
	if s.Schedule == "" {
		return nil, nil
	}
	sl := &Slots{}
	var err error
	if sl.loc, err = scheduleLocation(s.Timezone); err != nil {
		return nil, fmt.Errorf("timezone: %w", err)
	}
	if sl.sched, sl.every, err = parseSchedule(s.Schedule); err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	if sched, ok := sl.sched.(*cron.SpecSchedule); ok {
		sched.Location = sl.loc
	}
	if s.StartDate == "" {
		return nil, errors.New("start_date: required with a schedule")
	}
	if sl.Start, err = parseDate(s.StartDate); err != nil {
		return nil, fmt.Errorf("start_date: %w", err)
	}
	if s.EndDate != "" {
		if sl.End, err = parseDate(s.EndDate); err != nil {
			return nil, fmt.Errorf("end_date: %w", err)
		}
		if sl.End.Before(sl.Start) {
			return nil, fmt.Errorf("end_date: must not be before start_date %s", s.StartDate)
		}
	}
	return sl, nil
}

// First is the logical date of the first slot: the first schedule time
// at or after Start (Start itself for "@every").
func (sl *Slots) First() time.Time {
	start := sl.Start.Truncate(time.Second)
	if start.Before(sl.Start) {
		start = start.Add(time.Second)
	}
	if sl.every > 0 {
		return start.UTC()
	}
	return sl.sched.Next(start.Add(-time.Second).In(sl.loc)).UTC()
}

// From is the logical date of the first slot at or after t (and at or
// after Start): where a backfill over [t, …] begins (docs/schedules.md,
// "Backfill"). The result may be past End; check with Ended.
func (sl *Slots) From(t time.Time) time.Time {
	first := sl.First()
	if !t.After(first) {
		return first
	}
	if sl.every > 0 {
		k := (t.Sub(first) + sl.every - 1) / sl.every
		return first.Add(k * sl.every).UTC()
	}
	u := t.Truncate(time.Second)
	if u.Before(t) {
		u = u.Add(time.Second)
	}
	return sl.sched.Next(u.Add(-time.Second).In(sl.loc)).UTC()
}

// Next is the logical date of the slot after the one at t. It is also the
// end of t's data interval, and when t's run becomes due.
func (sl *Slots) Next(t time.Time) time.Time {
	if sl.every > 0 {
		return t.Add(sl.every).UTC()
	}
	return sl.sched.Next(t.In(sl.loc)).UTC()
}

// FastForward returns the slot k steps after cur, for the largest k ≥ 0
// that leaves it due no later than now (its own interval ending by now),
// and k, computed in one step for "@every" schedules. Cron schedules
// return cur and 0: their slots are walked with Next.
// It never passes End's last slot.
func (sl *Slots) FastForward(cur, now time.Time) (time.Time, int) {
	if sl.every > 0 && !sl.End.IsZero() && sl.End.Add(sl.every).Before(now) {
		now = sl.End.Add(sl.every)
	}
	if sl.every <= 0 || !cur.Add(sl.every).Before(now) {
		return cur, 0
	}
	k := int(now.Sub(cur)/sl.every) - 1
	if k <= 0 {
		return cur, 0
	}
	return cur.Add(time.Duration(k) * sl.every).UTC(), k
}

// Ended reports whether t is past End, so no slot at t exists.
func (sl *Slots) Ended(t time.Time) bool { return !sl.End.IsZero() && t.After(sl.End) }

func scheduleLocation(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, errors.New(`"Local" depends on the host; name an IANA zone such as "Europe/Berlin"`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown IANA time zone %s", quote(name))
	}
	return loc, nil
}

func parseSchedule(expr string) (cron.Schedule, time.Duration, error) {
	trimmed := strings.TrimSpace(expr)
	if strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return nil, 0, errors.New("a TZ= or CRON_TZ= prefix is not allowed; set the timezone field instead")
	}
	if rest, ok := strings.CutPrefix(trimmed, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, 0, fmt.Errorf("%s: the duration must be like 10s, 5m or 1h30m", quote(expr))
		}
		if d < time.Second || d%time.Second != 0 {
			return nil, 0, fmt.Errorf("%s: the duration must be a whole number of seconds, at least 1s", quote(expr))
		}
		return nil, d, nil
	}
	sched, err := cronParser.Parse(trimmed)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: must be five cron fields (minute hour day-of-month month day-of-week), "+
			"@hourly, @daily, @weekly, @monthly, @yearly or \"@every 10s\": %v", quote(expr), err)
	}
	return sched, 0, nil
}

func parseDate(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s is not an RFC 3339 time such as 2026-01-02T00:00:00Z", quote(s))
	}
	return t, nil
}

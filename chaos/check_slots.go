package chaos

import (
	"fmt"
	"time"
)

// InvSlots is the schedule's invariant: exactly one run per slot
// (docs/reliability.md, invariant 9).
const InvSlots = "9 schedule slots"

// ScheduleRecord is the workload's scheduled DAG ("@every Every" from
// Start, catchup on) and the window its slots are judged in.
type ScheduleRecord struct {
	DAG   string
	Start time.Time // start_date: the first slot's logical date
	Every time.Duration
	// DueBy: every slot whose data interval ended by then must have its
	// run. It is the end of the fault phase; the harness waits for the
	// schedule to catch up to it before it pauses the DAG.
	DueBy time.Time
	// Paused is when the harness paused the DAG: no slot after it is
	// created, so the check stops at the latest run that exists.
	Paused time.Time
}

// slot is the logical date of slot k.
func (s ScheduleRecord) slot(k int) time.Time { return s.Start.Add(time.Duration(k) * s.Every) }

// checkSlots: the scheduled runs of the workload's scheduled DAG are
// exactly one per slot of its grid (docs/schedules.md): no slot has two
// runs, no run has a logical date off the grid, no run was created before
// its slot was due (its data interval's end, on the database clock), and
// with catchup on no slot is missing, neither among the slots due by
// Schedule.DueBy nor before the latest slot that has a run (catch-up
// creates the missed slots oldest first).
func checkSlots(h *History) Result {
	r := Result{Invariant: InvSlots}
	s := h.Schedule
	if s.DAG == "" || s.Every <= 0 {
		r.Notes = append(r.Notes, "no scheduled DAG in this history")
		return r
	}
	runs := map[int][]RunRow{} // slot index -> its scheduled runs
	last := -1
	for _, run := range h.Runs {
		if run.DAG != s.DAG || run.Type != runTypeScheduled {
			continue
		}
		off := run.LogicalDate.Sub(s.Start)
		if off < 0 || off%s.Every != 0 {
			r.Violations = append(r.Violations, Violation{InvSlots, run.Created, fmt.Sprintf("run %d", run.ID),
				fmt.Sprintf("scheduled run of %s at logical date %s, off the grid (@every %s from %s)",
					s.DAG, run.LogicalDate.Format(time.RFC3339Nano), s.Every, s.Start.Format(time.RFC3339))})
			continue
		}
		k := int(off / s.Every)
		if due := s.slot(k + 1); run.Created.Before(due) {
			r.Violations = append(r.Violations, Violation{InvSlots, run.Created, fmt.Sprintf("run %d", run.ID),
				fmt.Sprintf("run of slot %s created at %s, before the slot was due at %s",
					run.LogicalDate.Format(time.RFC3339), run.Created.Format(time.RFC3339Nano), due.Format(time.RFC3339))})
		}
		runs[k] = append(runs[k], run)
		last = max(last, k)
	}
	for k := 0; k <= last || !s.slot(k+1).After(s.DueBy); k++ {
		r.Checked++
		switch list := runs[k]; {
		case len(list) > 1:
			r.Violations = append(r.Violations, Violation{InvSlots, list[1].Created, "slot " + s.slot(k).Format(time.RFC3339),
				fmt.Sprintf("%d scheduled runs of %s for one slot (runs %d and %d)", len(list), s.DAG, list[0].ID, list[1].ID)})
		case len(list) == 0 && k < last:
			r.Violations = append(r.Violations, Violation{InvSlots, s.slot(k + 1), "slot " + s.slot(k).Format(time.RFC3339),
				fmt.Sprintf("no run of %s for this slot, though the later slot %s has one (catch-up creates slots oldest first)",
					s.DAG, s.slot(last).Format(time.RFC3339))})
		case len(list) == 0:
			r.Violations = append(r.Violations, Violation{InvSlots, s.slot(k + 1), "slot " + s.slot(k).Format(time.RFC3339),
				fmt.Sprintf("no run of %s for this slot, due at %s, by the end of the fault phase (%s) plus the wait before the pause (%s)",
					s.DAG, s.slot(k+1).Format(time.RFC3339), s.DueBy.Format(time.RFC3339Nano), s.Paused.Format(time.RFC3339Nano))})
		}
	}
	return r
}

// runTypeScheduled is runs.run_type of a schedule's run (store.RunScheduled).
const runTypeScheduled = "scheduled"

package scheduler

import (
	"context"
	"time"

	"github.com/vigil-sched/vigil/store"
)

// ServiceSchedules is the leader service that creates scheduled runs.
const ServiceSchedules = "schedules"

// maxSlotSteps bounds how many slots one pass walks for one DAG, so a
// fine schedule with an old start_date cannot stall a pass; the next pass
// goes on from where this one stopped.
const maxSlotSteps = 100000

// Schedules runs one pass of the schedules service under epoch
// (docs/schedules.md, adr/0017-schedules.md): for every unpaused
// scheduled DAG whose next slot is due on the scheduler's Clock (the
// database clock), it creates the due slots' runs and advances the DAG's
// next-slot pointer in one fenced transaction per DAG. It returns how
// many runs it created. A DAG whose stored schedule no longer parses is
// logged and skipped.
func (s *Scheduler) Schedules(ctx context.Context, epoch int64) (int, error) {
	now, err := s.cfg.Clock.Now(ctx)
	if err != nil {
		return 0, err
	}
	dags, err := s.cfg.Store.ScheduledDAGs(ctx)
	if err != nil {
		return 0, err
	}
	created := 0
	for _, d := range dags {
		plan, ok, err := planSlots(d, now)
		if err != nil {
			s.log.Warn("schedules: stored schedule is invalid; skipping the DAG", "dag_id", d.Spec.DAGID, "err", err)
			continue
		}
		if !ok {
			continue
		}
		res, err := s.cfg.Store.CreateSlots(ctx, epoch, plan)
		if err != nil {
			return created, err
		}
		created += res.Created
		s.observeSlots(plan, res, now, epoch)
	}
	return created, nil
}

// observeSlots counts what one CreateSlots did in the schedule metrics
// and logs it. Each created run's lag is now (the pass's database-clock
// reading) minus its slot's due time, so it reads low by at most the
// pass's own duration. Skipped slots whose walk created no run carry no
// slots_skipped event (an event needs a run), so the log line is their
// only record.
func (s *Scheduler) observeSlots(plan store.SlotPlan, res store.SlotResult, now time.Time, epoch int64) {
	s.cfg.Metrics.ScheduleRunsCreated.WithLabelValues(store.RunScheduled).Add(float64(res.Created))
	for _, sl := range res.CreatedSlots {
		s.cfg.Metrics.ScheduleLag.Observe(max(now.Sub(sl.IntervalEnd).Seconds(), 0))
	}
	if res.Created > 0 || res.Existing > 0 || plan.Skipped > 0 {
		s.log.Info("schedules: slots created", "dag_id", plan.DAGID, "created", res.Created, "existing", res.Existing,
			"skipped", plan.Skipped, "held", plan.Held, "next_slot", plan.Next, "stale", res.Stale, "epoch", epoch)
	}
}

// planSlots works out, from d as read and the time now, which slots are
// due and where the pointer goes next; ok is false when there is nothing
// to write. A slot is due once its data interval has ended (its next
// slot's time has passed). With catchup the due slots are taken oldest
// first while the DAG's live runs stay below max_active_runs; without it
// only the latest due slot is taken and the others are counted as
// skipped.
func planSlots(d store.ScheduledDAG, now time.Time) (store.SlotPlan, bool, error) {
	sl, err := d.Spec.Slots()
	if err != nil || sl == nil {
		return store.SlotPlan{}, false, err
	}
	maxRuns := d.Spec.EffectiveMaxActiveRuns()
	plan := store.SlotPlan{DAGID: d.Spec.DAGID, Expect: d.NextSlot, MaxActiveRuns: maxRuns}
	var cur time.Time
	if d.NextSlot != nil {
		cur = d.NextSlot.UTC()
	} else {
		cur = sl.First()
		if d.LastSlot != nil {
			if n := sl.Next(*d.LastSlot); n.After(cur) {
				cur = n
			}
		}
	}
	room := maxRuns - d.Live
	if !d.Spec.Catchup {
		var k int
		cur, k = sl.FastForward(cur, now)
		plan.Skipped += k
	}
	steps := 0
	for ; steps < maxSlotSteps && !sl.Ended(cur); steps++ {
		if d.Spec.Catchup && len(plan.Slots) >= room {
			break
		}
		end := sl.Next(cur)
		if end.After(now) {
			break
		}
		plan.Slots = append(plan.Slots, store.Slot{LogicalDate: cur, IntervalStart: cur, IntervalEnd: end})
		cur = end
		if !d.Spec.Catchup && len(plan.Slots) > 1 {
			plan.Slots = plan.Slots[1:]
			plan.Skipped++
		}
	}
	if steps == maxSlotSteps && !d.Spec.Catchup {
		// The walk stopped short of now: its last slot is not the latest
		// due one, so it only moves the pointer.
		plan.Skipped += len(plan.Slots)
		plan.Slots = nil
	}
	plan.Next = cur
	plan.Held = len(plan.Slots) > 0 && d.Live >= maxRuns
	if len(plan.Slots) == 0 && plan.Skipped == 0 && d.NextSlot != nil {
		return plan, false, nil
	}
	return plan, true, nil
}

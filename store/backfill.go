package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/dag"
)

// BackfillMaxSlots caps the slots one backfill request may cover, so one
// call cannot queue an unbounded number of runs in one transaction; a
// longer range is split into several requests (docs/schedules.md,
// "Backfill").
const BackfillMaxSlots = 1000

// BackfillResult is what Backfill did over [From, To]: Slots is the
// number of schedule slots in the range whose data interval has ended,
// Created how many got a new backfill run, Existing how many already had
// one from an earlier backfill (and were left alone). RunIDs are the
// created runs, oldest slot first.
type BackfillResult struct {
	DAGID             string
	From, To          time.Time
	Slots             int
	Created, Existing int
	RunIDs            []int64
}

// BackfillRangeError is a from or to that breaks a rule; Field is "from"
// or "to", the API body's and the CLI's names.
type BackfillRangeError struct {
	DAGID, Field, Rule string
}

func (e *BackfillRangeError) Error() string {
	return fmt.Sprintf("backfill of dag %q: %s: %s", e.DAGID, e.Field, e.Rule)
}

// Backfill creates one queued run of type backfill per slot of dagID's
// schedule whose logical date lies in [from, to] and whose data interval
// has ended on the database clock, oldest first, each with its logical
// date and data interval (docs/schedules.md, "Backfill"). It is
// idempotent: a slot that already has a backfill run is counted in
// Existing and gets no second one (INSERT … ON CONFLICT DO NOTHING on
// runs_backfill_slot_idx). Scheduled and manual runs are left alone and
// do not stop a backfill run. A paused DAG is backfilled like any other;
// its runs queue under max_active_runs like every run of the DAG.
// Everything is one transaction: on an error nothing is created.
// Errors: ErrNotFound for an unknown DAG; ErrConflict when the DAG has no
// schedule; a *BackfillRangeError when from is after to, to is after the
// database clock's now, or the range holds more than BackfillMaxSlots
// slots.
func (s *Store) Backfill(ctx context.Context, dagID string, from, to time.Time) (BackfillResult, error) {
	res := BackfillResult{DAGID: dagID, From: from, To: to}
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		res.Created, res.Existing, res.RunIDs = 0, 0, nil
		var body []byte
		var now time.Time
		err := tx.QueryRow(ctx, `SELECT spec, now() FROM dags WHERE dag_id = $1 FOR SHARE`, dagID).Scan(&body, &now)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("dag %q: %w", dagID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		var spec dag.Spec
		if err := json.Unmarshal(body, &spec); err != nil {
			return fmt.Errorf("decode stored spec: %w", err)
		}
		slots, err := backfillSlots(&spec, from, to, now)
		if err != nil {
			return err
		}
		res.Slots = len(slots)
		for i := range slots {
			run, created, err := createRunTx(ctx, tx, &spec, runOrigin{Type: RunBackfill, Slot: &slots[i]})
			if err != nil {
				return fmt.Errorf("slot %s: %w", slots[i].LogicalDate.Format(time.RFC3339), err)
			}
			if !created {
				res.Existing++
				continue
			}
			res.Created++
			res.RunIDs = append(res.RunIDs, run.ID)
			if _, err := tx.Exec(ctx, `INSERT INTO events (run_id, kind, message) VALUES ($1, 'backfill_created', $2)`,
				run.ID, "backfill run for "+slotText(slots[i])+byActor(ctx)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		var rangeErr *BackfillRangeError
		if errors.As(err, &rangeErr) || errors.Is(err, ErrNotFound) {
			return BackfillResult{}, err
		}
		return BackfillResult{}, fmt.Errorf("backfill of dag %q: %w", dagID, err)
	}
	return res, nil
}

// backfillSlots lists the slots of spec's schedule with a logical date in
// [from, to] whose data interval ended by now, checking the range's rules.
func backfillSlots(spec *dag.Spec, from, to, now time.Time) ([]Slot, error) {
	rangeErr := func(field, format string, args ...any) error {
		return &BackfillRangeError{DAGID: spec.DAGID, Field: field, Rule: fmt.Sprintf(format, args...)}
	}
	switch {
	case from.After(to):
		return nil, rangeErr("from", "%s is after to %s", from.Format(time.RFC3339), to.Format(time.RFC3339))
	case to.After(now):
		return nil, rangeErr("to", "%s is in the future (database clock %s): a backfill covers past slots only",
			to.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	sl, err := spec.Slots()
	if err != nil {
		return nil, fmt.Errorf("stored spec: %w", err)
	}
	if sl == nil {
		return nil, fmt.Errorf("dag %q has no schedule, and a backfill runs a schedule's slots: %w", spec.DAGID, ErrConflict)
	}
	var out []Slot
	for cur := sl.From(from); !sl.Ended(cur) && !cur.After(to); cur = sl.Next(cur) {
		end := sl.Next(cur)
		if end.After(now) {
			break // its interval has not ended: the schedule creates it
		}
		if len(out) == BackfillMaxSlots {
			return nil, rangeErr("to", "[%s, %s] holds more than %d slots of schedule %q: split it into smaller ranges",
				from.Format(time.RFC3339), to.Format(time.RFC3339), BackfillMaxSlots, spec.Schedule)
		}
		out = append(out, Slot{LogicalDate: cur, IntervalStart: cur, IntervalEnd: end})
	}
	return out, nil
}

// slotText describes a slot for an event: its logical date and data
// interval, in UTC.
func slotText(sl Slot) string {
	return fmt.Sprintf("slot %s, data interval [%s, %s)", sl.LogicalDate.Format(time.RFC3339),
		sl.IntervalStart.Format(time.RFC3339), sl.IntervalEnd.Format(time.RFC3339))
}

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

// Slot is one schedule slot (docs/schedules.md): its logical date and
// its data interval [IntervalStart, IntervalEnd).
type Slot struct {
	LogicalDate   time.Time
	IntervalStart time.Time
	IntervalEnd   time.Time
}

// ScheduledDAG is an unpaused DAG with a schedule, as the schedules
// service reads it.
type ScheduledDAG struct {
	Spec *dag.Spec
	// NextSlot is dags.next_slot, the logical date of the next slot to
	// create; nil when it has not been computed yet.
	NextSlot *time.Time
	// LastSlot is the latest logical date of a scheduled run of the DAG,
	// nil when there is none; it seeds NextSlot after a schedule change.
	LastSlot *time.Time
	// Live counts the DAG's queued and running runs.
	Live int
}

// ScheduledDAGs returns every unpaused DAG that has a schedule, by dag_id.
func (s *Store) ScheduledDAGs(ctx context.Context) ([]ScheduledDAG, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT d.spec, d.next_slot,
		       (SELECT max(logical_date) FROM runs r WHERE r.dag_id = d.dag_id AND r.run_type = 'scheduled'),
		       (SELECT count(*) FROM runs r WHERE r.dag_id = d.dag_id AND r.state IN `+runLiveSQL+`)
		  FROM dags d
		 WHERE NOT d.paused AND d.spec ? 'schedule'
		 ORDER BY d.dag_id`)
	if err != nil {
		return nil, fmt.Errorf("scheduled dags: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ScheduledDAG, error) {
		var d ScheduledDAG
		var body []byte
		var live int64
		if err := r.Scan(&body, &d.NextSlot, &d.LastSlot, &live); err != nil {
			return d, err
		}
		d.Live = int(live)
		d.Spec = new(dag.Spec)
		return d, json.Unmarshal(body, d.Spec)
	})
	if err != nil {
		return nil, fmt.Errorf("scheduled dags: %w", err)
	}
	return out, nil
}

// SlotPlan is what one fenced transaction does for one DAG: create the
// runs of Slots (oldest first) and move dags.next_slot from Expect to
// Next. Skipped counts the due slots left out because catchup is off;
// Held is set when the DAG is at its max_active_runs, so the new runs
// wait in queued.
type SlotPlan struct {
	DAGID   string
	Expect  *time.Time
	Next    time.Time
	Slots   []Slot
	Skipped int
	Held    bool
	// MaxActiveRuns is the DAG's cap, for the held event's message.
	MaxActiveRuns int
}

// SlotResult is what CreateSlots did.
type SlotResult struct {
	// Created counts the runs inserted; Existing the slots that already
	// had their run (a second pass or a failover), which are not created
	// again.
	Created, Existing int
	// Stale is set when the DAG's next_slot was no longer Expect, or it
	// was paused or deleted since it was read: nothing was written.
	Stale bool
	// RunIDs are the created runs, oldest slot first, and CreatedSlots
	// their slots.
	RunIDs       []int64
	CreatedSlots []Slot
}

// CreateSlots carries out plan under epoch in one fenced transaction: it
// locks the DAG's row, checks next_slot still equals plan.Expect, inserts
// each slot's run with its TIs (INSERT … ON CONFLICT DO NOTHING on the
// scheduled-slot index, so a slot never gets a second run), marks them
// dirty, writes slot_created, slots_skipped and slot_held events, and sets
// next_slot to plan.Next. Errors: a *FencedError when epoch no longer
// leads.
func (s *Store) CreateSlots(ctx context.Context, epoch int64, plan SlotPlan) (SlotResult, error) {
	var res SlotResult
	err := s.LeaderTx(ctx, epoch, func(tx Tx) error {
		res = SlotResult{}
		var body []byte
		var next *time.Time
		var paused bool
		err := tx.QueryRow(ctx, `SELECT spec, next_slot, paused FROM dags WHERE dag_id = $1 FOR NO KEY UPDATE`, plan.DAGID).
			Scan(&body, &next, &paused)
		if errors.Is(err, pgx.ErrNoRows) {
			res.Stale = true
			return nil
		}
		if err != nil {
			return err
		}
		if paused || !sameTime(next, plan.Expect) {
			res.Stale = true
			return nil
		}
		var spec dag.Spec
		if err := json.Unmarshal(body, &spec); err != nil {
			return fmt.Errorf("decode stored spec: %w", err)
		}
		for _, sl := range plan.Slots {
			run, created, err := createRunTx(ctx, tx, &spec, runOrigin{Type: RunScheduled, Slot: &sl})
			if err != nil {
				return fmt.Errorf("slot %s: %w", sl.LogicalDate.Format(time.RFC3339), err)
			}
			if !created {
				res.Existing++
				continue
			}
			res.Created++
			res.RunIDs = append(res.RunIDs, run.ID)
			res.CreatedSlots = append(res.CreatedSlots, sl)
			batch := &pgx.Batch{}
			batch.Queue(`INSERT INTO events (run_id, kind, message) VALUES ($1, 'slot_created', $2)`, run.ID,
				"scheduled run for "+slotText(sl))
			if res.Created == 1 && plan.Skipped > 0 {
				batch.Queue(`INSERT INTO events (run_id, kind, message) VALUES ($1, 'slots_skipped', $2)`, run.ID,
					fmt.Sprintf("catchup is off: %d earlier due slots skipped", plan.Skipped))
			}
			if plan.Held {
				batch.Queue(`INSERT INTO events (run_id, kind, message) VALUES ($1, 'slot_held', $2)`, run.ID,
					fmt.Sprintf("max_active_runs %d reached: the run waits in queued", plan.MaxActiveRuns))
			}
			if err := tx.SendBatch(ctx, batch).Close(); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE dags SET next_slot = $2 WHERE dag_id = $1`, plan.DAGID, plan.Next)
		return err
	})
	if err != nil {
		return SlotResult{}, fmt.Errorf("create slots of %q: %w", plan.DAGID, err)
	}
	return res, nil
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/dag"
)

// Task pools (docs/pools.md): a named number of slots that caps the
// running TIs of the tasks naming it across every DAG, run and agent.
// The claim enforces the cap (claimSQL); this file keeps the pools
// themselves. Not to be confused with the connection pools of pools.go.

// TaskPool is one task pool as ListTaskPools reads it.
type TaskPool struct {
	Name  string
	Slots int
	// Running is the pool's TIs that occupy a slot (claimed or running),
	// as the read's snapshot saw them; it may exceed Slots only after the
	// pool was shrunk, until they drain.
	Running int
	// Queued is the pool's queued TIs, counted up to MaxPoolQueuedCount
	// (QueuedCapped then says there may be more).
	Queued       int
	QueuedCapped bool
	Description  string
	UpdatedAt    time.Time
}

// Bounds of the task pool reads and writes.
const (
	// MaxTaskPools bounds ListTaskPools (the first this many by name).
	MaxTaskPools = 1000
	// MaxPoolQueuedCount bounds the queued TIs counted per pool.
	MaxPoolQueuedCount = 10000
	// MaxPoolSlots bounds a pool's slots.
	MaxPoolSlots = 1000000
	// MaxPoolDescription bounds a pool's description, in bytes.
	MaxPoolDescription = 1000
)

// PoolInUseError refuses to delete a task pool that applied DAGs name or
// that has TIs not yet ended: deleting it would leave them waiting for a
// pool that no longer exists.
type PoolInUseError struct {
	Pool string
	// DAGs lists up to maxPoolUsers "dag_id task task_id" uses.
	DAGs []string
	// LiveTIs counts the pool's TIs in none, scheduled, queued, running or
	// up_for_retry (up to MaxPoolQueuedCount).
	LiveTIs int
}

func (e *PoolInUseError) Error() string {
	var why []string
	if len(e.DAGs) > 0 {
		why = append(why, fmt.Sprintf("DAG tasks name it (%s): apply them without it or delete the DAGs first",
			strings.Join(e.DAGs, ", ")))
	}
	if e.LiveTIs > 0 {
		why = append(why, fmt.Sprintf("%d of its task instances have not ended: wait for their runs or cancel them (vigil runs cancel RUN_ID)",
			e.LiveTIs))
	}
	return fmt.Sprintf("pool %q is in use: %s", e.Pool, strings.Join(why, "; "))
}

// maxPoolUsers bounds the uses a PoolInUseError lists.
const maxPoolUsers = 10

// MissingPoolsError refuses a DAG whose tasks name pools that do not
// exist, each use named by DAG, task and field.
type MissingPoolsError struct {
	DAGID string
	// Uses are the tasks' ids and the pools they name, in task order.
	Uses []PoolUse
}

// PoolUse is one task naming a pool.
type PoolUse struct{ TaskID, Pool string }

func (e *MissingPoolsError) Error() string {
	lines := make([]string, len(e.Uses))
	for i, u := range e.Uses {
		lines[i] = fmt.Sprintf("dag %q: task %q: pool: no such pool %q (create it with `vigil pools set %s --slots N`)",
			e.DAGID, u.TaskID, u.Pool, u.Pool)
	}
	return strings.Join(lines, "\n")
}

// checkPoolRefs returns a *MissingPoolsError for the tasks of spec that
// name a pool that does not exist, locking the rows of those that do (FOR
// KEY SHARE) until tx ends, so that no pools delete slips in between.
func checkPoolRefs(ctx context.Context, tx pgx.Tx, spec *dag.Spec, pools []string) error {
	rows, err := tx.Query(ctx, `SELECT name FROM task_pools WHERE name = ANY ($1) ORDER BY name FOR KEY SHARE`, pools)
	if err != nil {
		return fmt.Errorf("apply dag %q: check pools: %w", spec.DAGID, err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("apply dag %q: check pools: %w", spec.DAGID, err)
	}
	var missing []PoolUse
	for _, t := range spec.Tasks {
		if t.Pool != "" && !slices.Contains(found, t.Pool) {
			missing = append(missing, PoolUse{TaskID: t.ID, Pool: t.Pool})
		}
	}
	if len(missing) > 0 {
		return &MissingPoolsError{DAGID: spec.DAGID, Uses: missing}
	}
	return nil
}

// SetTaskPool creates the task pool name with slots, or changes its slots
// (and its description, when description is not nil). A pool shrunk
// below its running TIs admits none until they drain below the new
// slots; none is stopped. It reports whether the pool was created.
// Errors: a *PoolError naming the field and rule for a bad name, slots or
// description.
func (s *Store) SetTaskPool(ctx context.Context, name string, slots int, description *string) (bool, error) {
	if err := checkTaskPool(name, slots, description); err != nil {
		return false, err
	}
	var created bool
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `
			INSERT INTO task_pools (name, slots, description) VALUES ($1, $2, coalesce($3, ''))
			ON CONFLICT (name) DO UPDATE
			   SET slots = EXCLUDED.slots, description = coalesce($3, task_pools.description), updated_at = now()
			RETURNING (xmax = 0)`, name, slots, description).Scan(&created)
	})
	if err != nil {
		return false, fmt.Errorf("set pool %q: %w", name, err)
	}
	return created, nil
}

// PoolError is bad input to SetTaskPool: the field, the value's rule.
type PoolError struct{ Field, Rule string }

func (e *PoolError) Error() string { return e.Field + ": " + e.Rule }

func checkTaskPool(name string, slots int, description *string) error {
	switch {
	case !dag.ValidPoolName(name):
		return &PoolError{Field: "name", Rule: fmt.Sprintf("%q %s", name, dag.PoolNameRule)}
	case slots < 0 || slots > MaxPoolSlots:
		return &PoolError{Field: "slots", Rule: fmt.Sprintf("must be between 0 and %d (got %d)", MaxPoolSlots, slots)}
	case description != nil && len(*description) > MaxPoolDescription:
		return &PoolError{Field: "description", Rule: fmt.Sprintf("at most %d bytes (got %d)", MaxPoolDescription, len(*description))}
	case description != nil && strings.ContainsRune(*description, 0):
		return &PoolError{Field: "description", Rule: "must not contain NUL bytes"}
	}
	return nil
}

// taskPoolColumns reads a TaskPool from task_pools p: running is occupied
// less the releases not yet folded into it (both one snapshot's), queued
// counts through ti_pool_idx up to MaxPoolQueuedCount + 1.
var taskPoolColumns = `
	SELECT p.name, p.slots,
	       p.occupied - (SELECT count(*) FROM task_pool_releases r WHERE r.pool = p.name),
	       (SELECT count(*) FROM (SELECT 1 FROM task_instances t WHERE t.pool = p.name AND t.state = 'queued'
	                                LIMIT ` + strconv.Itoa(MaxPoolQueuedCount+1) + `) q),
	       p.description, p.updated_at
	  FROM task_pools p`

func scanTaskPool(row pgx.Row) (TaskPool, error) {
	var p TaskPool
	err := row.Scan(&p.Name, &p.Slots, &p.Running, &p.Queued, &p.Description, &p.UpdatedAt)
	if p.Queued > MaxPoolQueuedCount {
		p.Queued, p.QueuedCapped = MaxPoolQueuedCount, true
	}
	return p, err
}

// ListTaskPools returns the task pools by name, at most MaxTaskPools.
func (s *Store) ListTaskPools(ctx context.Context) ([]TaskPool, error) {
	rows, err := s.pool.Query(ctx, taskPoolColumns+` ORDER BY p.name LIMIT $1`, MaxTaskPools)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TaskPool, error) { return scanTaskPool(r) })
}

// GetTaskPool returns one task pool. Errors: ErrNotFound.
func (s *Store) GetTaskPool(ctx context.Context, name string) (TaskPool, error) {
	p, err := scanTaskPool(s.pool.QueryRow(ctx, taskPoolColumns+` WHERE p.name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return p, fmt.Errorf("pool %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return p, fmt.Errorf("get pool %q: %w", name, err)
	}
	return p, nil
}

// DeleteTaskPool deletes a task pool that no applied DAG names and no TI
// that has not ended belongs to (*PoolInUseError otherwise; Airflow
// deletes such a pool and leaves its tasks unscheduled, docs/pools.md).
// The pool's row is locked first, so an apply naming it (which locks it
// FOR KEY SHARE) either commits before the checks read or sees it gone.
// Errors: ErrNotFound.
func (s *Store) DeleteTaskPool(ctx context.Context, name string) error {
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM task_pools WHERE name = $1 FOR UPDATE`, name).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("pool %q: %w", name, ErrNotFound)
		}
		if err != nil {
			return err
		}
		inUse := &PoolInUseError{Pool: name}
		rows, err := tx.Query(ctx, `
			SELECT format('%s task %s', d.dag_id, t->>'id') FROM dags d, jsonb_array_elements(d.spec->'tasks') t
			 WHERE t->>'pool' = $1 ORDER BY d.dag_id LIMIT $2`, name, maxPoolUsers)
		if err != nil {
			return err
		}
		if inUse.DAGs, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `
			SELECT count(*) FROM (SELECT 1 FROM task_instances
			                       WHERE pool = $1 AND state NOT IN `+tiTerminalSQL+` LIMIT $2) l`,
			name, MaxPoolQueuedCount).Scan(&inUse.LiveTIs)
		if err != nil {
			return err
		}
		if len(inUse.DAGs) > 0 || inUse.LiveTIs > 0 {
			return inUse
		}
		_, err = tx.Exec(ctx, `
			WITH r AS (DELETE FROM task_pool_releases WHERE pool = $1)
			DELETE FROM task_pools WHERE name = $1`, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete pool %q: %w", name, err)
	}
	return nil
}

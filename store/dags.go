package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/dag"
)

// ApplyDAG inserts or replaces a validated spec. It returns "created",
// "updated" or "unchanged" (same spec hash). Runs already triggered keep
// the task definitions they were created with. The spec's paused is the
// DAG's initial state only; a change of schedule, timezone or start_date
// makes the schedules service recompute the next slot (docs/schedules.md).
//
// A spec that names secrets ({secret: NAME} in a task's env) is applied
// only when every one exists, checked in the apply's transaction with
// the secrets' rows locked FOR KEY SHARE so that no delete slips in
// between: *MissingSecretsError otherwise. Likewise every webhook its
// notify list names must exist (*MissingWebhooksError), and the list is
// stored in dag_notify in the same transaction, where the outbox
// triggers read it (docs/notifications.md). Likewise a spec whose tasks
// name task pools, with the pools' rows: *MissingPoolsError.
func (s *Store) ApplyDAG(ctx context.Context, spec *dag.Spec) (string, error) {
	names, pools := spec.SecretNames(), spec.Pools()
	var result string
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		if len(names) > 0 {
			if err := checkSecretRefs(ctx, tx, spec, names); err != nil {
				return err
			}
		}
		if len(pools) > 0 {
			if err := checkPoolRefs(ctx, tx, spec, pools); err != nil {
				return err
			}
		}
		var err error
		if result, err = applyDAG(ctx, tx, spec); err != nil || result == "unchanged" {
			return err
		}
		return syncNotify(ctx, tx, spec)
	})
	return result, err
}

// applyDAG is ApplyDAG's upsert, on the pool or in a transaction.
func applyDAG(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, spec *dag.Spec) (string, error) {
	body, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("apply dag %q: encode: %w", spec.DAGID, err)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	var inserted bool
	err = q.QueryRow(ctx, `
		INSERT INTO dags (dag_id, spec, spec_hash, max_active_tasks, paused, max_active_runs)
		VALUES ($1, $2, $3, $4, $5, nullif($6, 0))
		ON CONFLICT (dag_id) DO UPDATE
		   SET spec = EXCLUDED.spec, spec_hash = EXCLUDED.spec_hash,
		       max_active_tasks = EXCLUDED.max_active_tasks, max_active_runs = EXCLUDED.max_active_runs,
		       next_slot = CASE WHEN dags.spec->>'schedule' IS NOT DISTINCT FROM EXCLUDED.spec->>'schedule'
		                         AND dags.spec->>'timezone' IS NOT DISTINCT FROM EXCLUDED.spec->>'timezone'
		                         AND dags.spec->>'start_date' IS NOT DISTINCT FROM EXCLUDED.spec->>'start_date'
		                        THEN dags.next_slot END,
		       updated_at = now()
		 WHERE dags.spec_hash <> EXCLUDED.spec_hash
		RETURNING (xmax = 0)`, spec.DAGID, body, hash, spec.MaxActiveTasks, spec.Paused,
		spec.EffectiveMaxActiveRuns()).Scan(&inserted)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "unchanged", nil
	case err != nil:
		return "", fmt.Errorf("apply dag %q: %w", spec.DAGID, err)
	case inserted:
		return "created", nil
	default:
		return "updated", nil
	}
}

// ListDAGs returns every applied DAG ordered by id, without specs.
func (s *Store) ListDAGs(ctx context.Context) ([]DAGSummary, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT dag_id, jsonb_array_length(spec->'tasks'), paused, octet_length(spec::text), updated_at
		  FROM dags ORDER BY dag_id`)
	if err != nil {
		return nil, fmt.Errorf("list dags: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (DAGSummary, error) {
		var d DAGSummary
		err := r.Scan(&d.DAGID, &d.Tasks, &d.Paused, &d.SpecBytes, &d.UpdatedAt)
		return d, err
	})
}

// GetDAG returns one DAG's parsed spec and its summary (pause state,
// size, last change), or ErrNotFound.
func (s *Store) GetDAG(ctx context.Context, dagID string) (*dag.Spec, DAGSummary, error) {
	var body []byte
	var d DAGSummary
	err := s.pool.QueryRow(ctx, `SELECT dag_id, paused, spec::text, updated_at FROM dags WHERE dag_id = $1`, dagID).
		Scan(&d.DAGID, &d.Paused, &body, &d.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, d, fmt.Errorf("dag %q: %w", dagID, ErrNotFound)
	}
	if err != nil {
		return nil, d, fmt.Errorf("get dag %q: %w", dagID, err)
	}
	var spec dag.Spec
	if err := json.Unmarshal(body, &spec); err != nil {
		return nil, d, fmt.Errorf("get dag %q: decode stored spec: %w", dagID, err)
	}
	d.Tasks, d.SpecBytes = len(spec.Tasks), len(body)
	return &spec, d, nil
}

// SetPaused pauses (paused true) or unpauses a DAG: a paused DAG's
// schedule creates no runs until it is unpaused (docs/schedules.md).
// Runs already created are untouched. It reports whether the state
// changed. Errors: ErrNotFound for an unknown dag_id.
func (s *Store) SetPaused(ctx context.Context, dagID string, paused bool) (bool, error) {
	var was bool
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `
			UPDATE dags d SET paused = $2 FROM (SELECT paused FROM dags WHERE dag_id = $1 FOR UPDATE) old
			 WHERE d.dag_id = $1 RETURNING old.paused`, dagID, paused).Scan(&was)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("dag %q: %w", dagID, ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("set paused of dag %q: %w", dagID, err)
	}
	return was != paused, nil
}

// DAGSchedule is what `vigil dags next` reads of a DAG: its spec, pause
// state, dags.next_slot (nil until the schedules service computed it)
// and the logical date of its latest scheduled run (nil when none).
type DAGSchedule struct {
	Spec     *dag.Spec
	Paused   bool
	NextSlot *time.Time
	LastSlot *time.Time
}

// GetDAGSchedule returns one DAG's schedule state, or ErrNotFound.
func (s *Store) GetDAGSchedule(ctx context.Context, dagID string) (DAGSchedule, error) {
	var d DAGSchedule
	var body []byte
	err := s.pool.QueryRow(ctx, `
		SELECT d.spec, d.paused, d.next_slot,
		       (SELECT max(logical_date) FROM runs r WHERE r.dag_id = d.dag_id AND r.run_type = 'scheduled')
		  FROM dags d WHERE d.dag_id = $1`, dagID).Scan(&body, &d.Paused, &d.NextSlot, &d.LastSlot)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("dag %q: %w", dagID, ErrNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("get schedule of dag %q: %w", dagID, err)
	}
	d.Spec = new(dag.Spec)
	if err := json.Unmarshal(body, d.Spec); err != nil {
		return d, fmt.Errorf("get schedule of dag %q: decode stored spec: %w", dagID, err)
	}
	return d, nil
}

package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Task outputs (docs/task-environment.md, "Outputs"; migration 020): one
// ti_outputs row per TI, the outputs of its try try_number. A success
// writes them in the statement that records it (finishTI,
// completeSuccessOutputsSQL), replacing an earlier try's. They are the
// TI's outputs only while it is success at that try by a completion
// (reason NULL): a cleared TI (state none, then its new try's claim
// counts try_number on) shows none until its new try succeeds and
// replaces them, and a TI marked success by hand (reason marked, the
// try_number of the try cleared before) shows none: it did not run, so
// an older success's outputs at the same try_number never show again.

// upsertOutputsSQL and onOutputsConflictSQL frame the SELECT of
// (ti_id, try_number, outputs, bytes) rows that a success stores.
const (
	upsertOutputsSQL     = `INSERT INTO ti_outputs (ti_id, try_number, outputs, bytes)`
	onOutputsConflictSQL = `ON CONFLICT (ti_id) DO UPDATE
	    SET try_number = excluded.try_number, outputs = excluded.outputs, bytes = excluded.bytes`
)

// outputsArg encodes a completion's outputs for the outputs column, with
// their size (the bytes of keys and values); nil for none.
func outputsArg(out map[string]string) ([]byte, int, error) {
	if len(out) == 0 {
		return nil, 0, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, 0, fmt.Errorf("outputs: %w", err)
	}
	n := 0
	for k, v := range out {
		n += len(k) + len(v)
	}
	return b, n, nil
}

// UpstreamInputs is what a claimed TI receives from its direct upstreams
// (UpstreamOutputs): each upstream task's outputs by task id, and the
// bytes of all their keys and values.
type UpstreamInputs struct {
	Outputs map[string]map[string]string // nil when Bytes is over the caller's bound
	Bytes   int
}

// upstreamOutputsSQL reads the outputs of the successful direct
// upstreams of the TIs $1; the outputs of a TI whose total is over $2
// bytes are left out (NULL), its total kept. Each claimed TI is read by
// its key, each upstream by (run_id, task_id), the unique key, and its
// outputs by theirs: the LIMIT 1 subqueries are lookups the planner
// cannot turn into a scan of every success TI (which is what it chose
// for a plain join while the table's statistics were young), so its cost
// is the claimed TIs' upstreams, however many TIs the table holds
// (TestUpstreamOutputsPlanIsLookups).
const upstreamOutputsSQL = `
	WITH c AS MATERIALIZED (
	  SELECT t.id, t.run_id, t.upstream FROM unnest($1::bigint[]) AS i(id)
	   CROSS JOIN LATERAL (SELECT id, run_id, upstream FROM task_instances WHERE id = i.id LIMIT 1) t
	   WHERE cardinality(t.upstream) > 0),
	u AS MATERIALIZED (
	  SELECT c.id, up.task_id, o.outputs, o.bytes
	    FROM c CROSS JOIN LATERAL unnest(c.upstream) AS x(task_id)
	    CROSS JOIN LATERAL (
	      SELECT t.id, t.task_id, t.try_number FROM task_instances t
	       WHERE t.run_id = c.run_id AND t.task_id = x.task_id AND t.state = 'success' AND t.reason IS NULL
	       LIMIT 1) up
	    CROSS JOIN LATERAL (
	      SELECT p.outputs, p.bytes FROM ti_outputs p WHERE p.ti_id = up.id AND p.try_number = up.try_number
	       LIMIT 1) o),
	tot AS (SELECT id, sum(bytes)::bigint AS total FROM u GROUP BY id)
	SELECT u.id, u.task_id, CASE WHEN tot.total <= $2 THEN u.outputs END, tot.total
	  FROM u JOIN tot USING (id)`

// UpstreamOutputs reads, for each TI of tiIDs, the outputs of its direct
// upstreams that ended success (only of their current try), keyed by
// TI id; a TI none of whose upstreams has outputs is absent. A TI whose
// upstreams' outputs are over maxBytes (keys and values) gets its total
// only, so a claim reply never carries more than maxBytes per TI.
func (s *Store) UpstreamOutputs(ctx context.Context, tiIDs []int64, maxBytes int) (map[int64]UpstreamInputs, error) {
	if len(tiIDs) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, upstreamOutputsSQL, tiIDs, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("upstream outputs of %d task instances: %w", len(tiIDs), err)
	}
	out := map[int64]UpstreamInputs{}
	var id, total int64
	var task string
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &task, &raw, &total}, func() error {
		in := out[id]
		in.Bytes = int(total)
		if raw != nil {
			var kv map[string]string
			if err := json.Unmarshal(raw, &kv); err != nil {
				return fmt.Errorf("ti %d: outputs of upstream %s: %w", id, task, err)
			}
			if in.Outputs == nil {
				in.Outputs = map[string]map[string]string{}
			}
			in.Outputs[task] = kv
		}
		out[id] = in
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("upstream outputs of %d task instances: %w", len(tiIDs), err)
	}
	return out, nil
}

// TIOutputs is one task instance's outputs as RunOutputs returns them:
// those of try TryNumber, the try that made it success. Ordinal is the
// task's place in the DAG, the cursor of the next page.
type TIOutputs struct {
	TIID      int64
	TaskID    string
	Ordinal   int
	TryNumber int
	Outputs   map[string]string
	Bytes     int
}

// Bounds of a RunOutputs page.
const (
	// OutputsPageBytes bounds a page: it holds the task instances whose
	// outputs start within this many bytes of keys and values (the first
	// one always), 64 of outputs.MaxBytes.
	OutputsPageBytes = 4 << 20
	// OutputsPageMax bounds a page in task instances.
	OutputsPageMax = 1000
)

// runOutputsSQL is RunOutputs' statement ($1 the run, $2 a task id or
// "", $3 the ordinal to start after, $4 OutputsPageBytes, $5
// OutputsPageMax): the run's TIs by run_id, the first column of the
// (run_id, task_id) key, and each one's outputs by ti_id in a LIMIT 1
// lateral, so no plan scans ti_outputs (TestUpstreamOutputsPlanIsLookups);
// the running sum of bytes cuts the page before any outputs are read.
const runOutputsSQL = `
	SELECT p.id, p.task_id, p.ordinal, p.try_number, o.outputs, p.bytes, p.n
	  FROM (SELECT t.id, t.task_id, t.ordinal, b.try_number, b.bytes,
	               sum(b.bytes) OVER (ORDER BY t.ordinal) - b.bytes AS before,
	               count(*) OVER () AS n
	          FROM task_instances t
	          CROSS JOIN LATERAL (SELECT try_number, bytes FROM ti_outputs
	                               WHERE ti_id = t.id AND try_number = t.try_number LIMIT 1) b
	         WHERE t.run_id = $1 AND t.state = 'success' AND t.reason IS NULL
	           AND ($2 = '' OR t.task_id = $2) AND t.ordinal > $3) p
	  CROSS JOIN LATERAL (SELECT outputs FROM ti_outputs WHERE ti_id = p.id LIMIT 1) o
	 WHERE p.before < $4
	 ORDER BY p.ordinal LIMIT $5`

// RunOutputs returns a page of the outputs of run runID's task instances
// that are success and have any, in the DAG's task order, after the task
// of ordinal after (-1: from the first); taskID, when not empty, keeps
// that task's only. The page is bounded by OutputsPageBytes and
// OutputsPageMax (sizes read from ti_outputs.bytes, without reading the
// outputs); more is true when it stopped at a bound, and the next page
// starts after its last Ordinal. Errors: ErrNotFound when the run does
// not exist, or has no task taskID.
func (s *Store) RunOutputs(ctx context.Context, runID int64, taskID string, after int) (page []TIOutputs, more bool, err error) {
	var exists bool
	err = s.pool.QueryRow(ctx, `
		SELECT CASE WHEN $2 = '' THEN EXISTS (SELECT 1 FROM runs WHERE id = $1)
		            ELSE EXISTS (SELECT 1 FROM task_instances WHERE run_id = $1 AND task_id = $2) END`,
		runID, taskID).Scan(&exists)
	if err != nil {
		return nil, false, fmt.Errorf("outputs of run %d: %w", runID, err)
	}
	if !exists {
		if taskID != "" {
			return nil, false, fmt.Errorf("run %d task %q: %w", runID, taskID, ErrNotFound)
		}
		return nil, false, fmt.Errorf("run %d: %w", runID, ErrNotFound)
	}
	rows, err := s.pool.Query(ctx, runOutputsSQL, runID, taskID, after, OutputsPageBytes, OutputsPageMax)
	if err != nil {
		return nil, false, fmt.Errorf("outputs of run %d: %w", runID, err)
	}
	var total int
	page, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (TIOutputs, error) {
		var o TIOutputs
		var raw []byte
		if err := r.Scan(&o.TIID, &o.TaskID, &o.Ordinal, &o.TryNumber, &raw, &o.Bytes, &total); err != nil {
			return o, err
		}
		return o, json.Unmarshal(raw, &o.Outputs)
	})
	if err != nil {
		return nil, false, fmt.Errorf("outputs of run %d: %w", runID, err)
	}
	return page, len(page) < total, nil
}

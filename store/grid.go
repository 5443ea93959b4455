package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
)

// GridRun is one run of a DAG's grid (GET /v1/dags/{dag_id}/grid): its
// state and times, and the state and try of each of its TIs.
type GridRun struct {
	ID          int64
	State       state.Run
	RunType     string
	QueuedAt    time.Time
	StartDate   *time.Time
	EndDate     *time.Time
	LogicalDate *time.Time
	// TIs are the run's task instances in declaration order.
	TIs []GridTI
}

// GridTI is one cell of the grid: a TI's task, state and try number (0
// before its first claim).
type GridTI struct {
	TaskID    string
	State     state.TI
	TryNumber int
}

// gridSQL reads the last $2 runs of DAG $1 from runs_dag_idx (dag_id, id),
// newest first, and each run's TIs by task_instances' (run_id, task_id)
// key: its reads are those runs and their TIs, whatever the history
// (TestDAGGridReadsDoNotGrowWithHistory). The TIs are a LATERAL subquery
// with its own ORDER BY, which PostgreSQL does not flatten into a join: a
// plain join let the generic plan of the prepared statement, which
// assumes LIMIT $2 keeps a tenth of the DAG's runs, hash it with a
// sequential scan of task_instances.
const gridSQL = `
	SELECT r.id, r.state, r.run_type, r.queued_at, r.start_date, r.end_date, r.logical_date,
	       t.task_id, t.state, t.try_number
	  FROM (SELECT id, state, run_type, queued_at, start_date, end_date, logical_date
	          FROM runs WHERE dag_id = $1 ORDER BY id DESC LIMIT $2) r
	 CROSS JOIN LATERAL (SELECT task_id, state, try_number, ordinal
	          FROM task_instances WHERE run_id = r.id ORDER BY ordinal) t
	 ORDER BY r.id DESC, t.ordinal`

// DAGGrid is a DAG's grid: its tasks, and its last runs with their TIs.
type DAGGrid struct {
	// Tasks are the task ids of the DAG's current spec, in declaration
	// order. A run made from an older spec may have others.
	Tasks []string
	// Limit is the number of runs asked for, after the TI bound.
	Limit int
	// Runs are newest first.
	Runs []GridRun
	// Truncated: runs within Limit were left out because their TIs passed
	// the bound (runs made when the DAG had more tasks).
	Truncated bool
}

// DAGGrid returns the last limit runs of dagID, newest first, each with
// its TIs, holding at most maxTIs TIs. The limit is first lowered to
// maxTIs divided by the DAG's current number of tasks (at least one run);
// if runs made from an older, wider spec still pass maxTIs, the run that
// crosses it and every older one are left out and Truncated is set (the
// newest run is always kept whole). limit and maxTIs must be positive;
// the API bounds both (protocol.GridRunsMax, protocol.GridCellsMax).
// Errors: ErrNotFound for an unknown DAG.
func (s *Store) DAGGrid(ctx context.Context, dagID string, limit, maxTIs int) (DAGGrid, error) {
	if limit < 1 || maxTIs < 1 {
		return DAGGrid{}, fmt.Errorf("grid of dag %q: limit %d and maxTIs %d must be positive", dagID, limit, maxTIs)
	}
	var g DAGGrid
	err := s.pool.QueryRow(ctx, `SELECT jsonb_path_query_array(spec, '$.tasks[*].id') FROM dags WHERE dag_id = $1`, dagID).
		Scan(&g.Tasks)
	if errors.Is(err, pgx.ErrNoRows) {
		return DAGGrid{}, fmt.Errorf("dag %q: %w", dagID, ErrNotFound)
	}
	if err != nil {
		return DAGGrid{}, fmt.Errorf("grid of dag %q: %w", dagID, err)
	}
	g.Limit = min(limit, max(1, maxTIs/max(1, len(g.Tasks))))
	g.Runs, g.Truncated, err = s.gridRuns(ctx, dagID, g.Limit, maxTIs)
	if err != nil {
		return DAGGrid{}, fmt.Errorf("grid of dag %q: %w", dagID, err)
	}
	return g, nil
}

// gridRuns reads the runs of the grid with gridSQL, keeping at most
// maxTIs TIs as DAGGrid says. gridSQL is planned with its arguments each
// time (plannedEachTime), as ListRuns' statements are and for the
// same reason (listRunsSQL): a generic plan judges the DAG's share of the
// runs by an average.
func (s *Store) gridRuns(ctx context.Context, dagID string, limit, maxTIs int) (runs []GridRun, truncated bool, err error) {
	rows, err := s.pool.Query(ctx, gridSQL, plannedEachTime, dagID, limit)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	read := 0
	for rows.Next() {
		var r GridRun
		var ti GridTI
		if err := rows.Scan(&r.ID, &r.State, &r.RunType, &r.QueuedAt, &r.StartDate, &r.EndDate, &r.LogicalDate,
			&ti.TaskID, &ti.State, &ti.TryNumber); err != nil {
			return nil, false, err
		}
		if n := len(runs); n == 0 || runs[n-1].ID != r.ID {
			runs = append(runs, r)
		}
		if read++; read > maxTIs && len(runs) > 1 {
			return runs[:len(runs)-1], true, nil
		}
		last := &runs[len(runs)-1]
		last.TIs = append(last.TIs, ti)
	}
	return runs, false, rows.Err()
}

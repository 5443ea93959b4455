package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// LiveRunsError refuses to delete a DAG that has queued or running runs:
// they would lose the DAG their scheduling reads (max_active_runs, the
// schedule). RunIDs lists up to maxLiveRunsShown of them, oldest first.
type LiveRunsError struct {
	DAGID  string
	RunIDs []int64
	// More is true when there are more live runs than RunIDs lists.
	More bool
}

func (e *LiveRunsError) Error() string {
	more := ""
	if e.More {
		more = " and more"
	}
	return fmt.Sprintf("dag %q has live (queued or running) runs %v%s: cancel each with `vigil runs cancel RUN_ID` "+
		"(or wait for them to end), then delete the DAG", e.DAGID, e.RunIDs, more)
}

// maxLiveRunsShown bounds the run ids a LiveRunsError lists.
const maxLiveRunsShown = 20

// lockDAGRow locks dagID's row FOR KEY SHARE until tx ends, so that
// DeleteDAG (FOR UPDATE) cannot remove the DAG while tx creates a run of
// it: runs.dag_id has no foreign key since migration 025, so that a
// deleted DAG's runs stay. Errors: ErrNotFound.
func lockDAGRow(ctx context.Context, tx pgx.Tx, dagID string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM dags WHERE dag_id = $1 FOR KEY SHARE`, dagID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("dag %q: %w", dagID, ErrNotFound)
	}
	return err
}

// DeleteDAG deletes a DAG that has no queued or running run
// (*LiveRunsError otherwise): its spec and its schedule (dags.next_slot)
// go with its row, so no new run of it is created; its ended runs, their
// TIs, events and logs stay until retention removes them
// (docs/dags.md, "Deleting a DAG"). The row is locked first (FOR UPDATE),
// so a run being created (every path locks the row: the schedules
// service FOR NO KEY UPDATE, a backfill FOR SHARE, a trigger FOR KEY
// SHARE) either commits before the check reads the runs, or finds the
// DAG gone. Errors: ErrNotFound.
func (s *Store) DeleteDAG(ctx context.Context, dagID string) error {
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM dags WHERE dag_id = $1 FOR UPDATE`, dagID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("dag %q: %w", dagID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			SELECT id FROM runs WHERE dag_id = $1 AND state IN `+runLiveSQL+` ORDER BY id LIMIT $2`,
			dagID, maxLiveRunsShown+1)
		if err != nil {
			return err
		}
		live, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		if len(live) > 0 {
			e := &LiveRunsError{DAGID: dagID, RunIDs: live}
			if len(live) > maxLiveRunsShown {
				e.RunIDs, e.More = live[:maxLiveRunsShown], true
			}
			return e
		}
		_, err = tx.Exec(ctx, `DELETE FROM dags WHERE dag_id = $1`, dagID)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete dag %q: %w", dagID, err)
	}
	return nil
}

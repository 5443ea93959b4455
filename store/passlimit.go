package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A scheduling pass is one fenced transaction whose statements all range
// over its runs' TIs, so its cost grows with the TIs it takes, not with
// the runs: a pass of 256 runs of 1,000 TIs each outlived its deadline,
// rolled back and was retried with the same batch forever
// (adr/0011-incremental-scheduler.md, "Amendment: passes bounded by TIs").

// DefaultPassTIs is the default TI budget of one scheduling or reconcile
// pass: the non-terminal TIs summed over the runs it takes.
const DefaultPassTIs = 8000

// PassLimit bounds the runs one scheduling (SchedulePass) or reconcile
// (ReconcileRuns) pass takes, oldest first.
type PassLimit struct {
	// Runs is the most runs a pass takes; at least 1.
	Runs int
	// TIs is the budget of non-terminal TIs (none, scheduled, queued,
	// running, up_for_retry) summed over the runs taken: runs are taken
	// while the sum stays within it, except that the first run is always
	// taken whatever its width, so a pass always progresses. 0 means no
	// TI bound.
	TIs int
	// Skip lists runs a SchedulePass leaves in the queue (runs that alone
	// ran out of time, retried on their own); ignored by ReconcileRuns.
	Skip []int64
	// Only, when not empty, restricts a SchedulePass to these runs' dirty
	// rows; ignored by ReconcileRuns.
	Only []int64
}

// PassError is the error of a scheduling pass whose transaction failed
// after it took its runs: RunIDs are those runs (their dirty rows were
// rolled back and stay queued), so the caller can retry with a smaller
// batch or set aside a run that alone cannot finish (PassLimit.Skip).
type PassError struct {
	RunIDs []int64
	Err    error
}

func (e *PassError) Error() string { return fmt.Sprintf("pass over %d runs: %v", len(e.RunIDs), e.Err) }

func (e *PassError) Unwrap() error { return e.Err }

// IsPassTimeout reports whether err is a pass that ran out of time: its
// context's deadline, or PostgreSQL's statement_timeout (SQLSTATE 57014,
// query_canceled) from the leader session's LeaderTimeouts. Such a pass
// was too big for its bound; retrying the same batch fails the same way.
func IsPassTimeout(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "57014" {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err)
}

// runWidthSQL lists candidate runs (the query in $1's place yields run_id
// and an ordering key k) with their non-terminal TI count, each count
// capped at the budget + 1 so a very wide run costs at most that many
// index reads.
func runWidthSQL(candidates string) string {
	return `WITH c AS (` + candidates + `)
		SELECT c.run_id, w.n FROM c
		  CROSS JOIN LATERAL (SELECT count(*) AS n FROM (
		      SELECT 1 FROM task_instances t
		       WHERE t.run_id = c.run_id AND t.state NOT IN ` + tiTerminalSQL + `
		       LIMIT $2) x) w
		 ORDER BY c.k`
}

// takeWithin reads (run_id, width) rows, in order, and returns the
// longest prefix whose widths sum within budget (at least the first row),
// and whether rows were left over.
func takeWithin(rows pgx.Rows, budget int) (ids []int64, more bool, err error) {
	type cand struct {
		ID int64
		N  int
	}
	cands, err := pgx.CollectRows(rows, pgx.RowToStructByPos[cand])
	if err != nil {
		return nil, false, err
	}
	sum := 0
	for i, c := range cands {
		sum += c.N
		if i > 0 && budget > 0 && sum > budget {
			return ids, true, nil
		}
		ids = append(ids, c.ID)
	}
	return ids, false, nil
}

// widthCap is the per-run count cap passed to runWidthSQL as $2.
func widthCap(lim PassLimit) int {
	if lim.TIs <= 0 {
		return 0 // LIMIT 0 counts nothing: no TI bound
	}
	return lim.TIs + 1
}

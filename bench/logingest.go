package main

// The log ingest figure (issue 23): one task printing LogLines short
// lines on `vigil lite` with one in-process agent, every line stored.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// logDAG is the DAG of the log ingest figure: one task, `seq 1 N`.
const logDAG = "loud"

// logSpec is logDAG printing n lines ("1" to "n", 1 to 8 bytes each).
func logSpec(n int) string {
	return fmt.Sprintf("dag_id: %s\ntasks:\n  - id: print\n    command: [seq, \"1\", \"%d\"]\n    tags: [%s]\n", logDAG, n, benchTag)
}

// logIngest starts `vigil lite` with one in-process agent offering
// benchTag, runs logDAG once, and reports log ingest end to end: the
// lines stored over the span from the run's creation to the last line's
// arrival, both on the database clock, with the count stored (all
// LogLines of them, or the figure says how many are missing).
func (e *env) logIngest(ctx context.Context, conn *pgx.Conn) error {
	want := int64(e.cfg.LogLines)
	e.progress("log ingest", "lines", want)
	v, err := e.startVigil(ctx, "vigil-logs", "--agents", "1", "--agent-tags", benchTag)
	if err != nil {
		return err
	}
	defer v.stop(30 * time.Second)
	runs, err := trigger(ctx, v, logDAG, 1)
	if err != nil {
		return err
	}
	stored := func() (int64, error) { return storedLines(ctx, conn, runs[0]) }
	if _, err := e.waitCount(ctx, want, litePoll, stored, v.exited); err != nil {
		return err
	}
	var n int64
	var secs *float64
	var state string
	err = conn.QueryRow(ctx, `
		SELECT count(l.id), extract(epoch FROM max(l.received_at) - r.queued_at)::float8, t.state
		  FROM runs r JOIN task_instances t ON t.run_id = r.id LEFT JOIN task_logs l ON l.ti_id = t.id
		 WHERE r.id = $1 GROUP BY r.queued_at, t.state`, runs[0]).Scan(&n, &secs, &state)
	if err != nil {
		return fmt.Errorf("log ingest: %w", err)
	}
	label := fmt.Sprintf("log ingest (1 task, seq 1 %d)", want)
	if secs == nil || *secs <= 0 {
		e.out.missing(label, fmt.Sprintf("%d lines stored, task %s", n, state))
		return v.stop(30 * time.Second)
	}
	note := fmt.Sprintf("%d of %d lines stored in %.1fs, trigger to last line; task %s", n, want, *secs, state)
	key := "log_ingest"
	if n < want {
		key = ""
		note = fmt.Sprintf("INCOMPLETE: %s (-phase-timeout %s)", note, e.cfg.PhaseTimeout)
	}
	e.out.figure(key, label, float64(n)/(*secs), "lines/s", note)
	return v.stop(30 * time.Second)
}

// storedLines counts the log lines stored for run's TIs.
func storedLines(ctx context.Context, conn *pgx.Conn, run int64) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, `SELECT count(*) FROM task_logs l JOIN task_instances t ON t.id = l.ti_id WHERE t.run_id = $1`, run).Scan(&n)
	return n, err
}

package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AppendLogs stores a batch of log lines from agentID. Every attempt in the
// batch must be one the agent claimed (its current attempt, or an older one
// recorded by a ti_claimed event), else ErrForbidden and nothing is
// written. Replays are idempotent on (attempt_id, seq). Lines keep the
// agent's original timestamps (docs/design.md §4 logs). A gap marker's
// Dropped count is added to its TI's log_dropped once, when the marker is
// first stored. It returns how many lines were new and the dropped count
// their markers added.
func (s *Store) AppendLogs(ctx context.Context, agentID int64, lines []LogLine) (LogAppend, error) {
	var out LogAppend
	if len(lines) == 0 {
		return out, nil
	}
	n := len(lines)
	tis, attempts, seqs := make([]int64, n), make([]string, n), make([]int64, n)
	streams, texts, times := make([]string, n), make([]string, n), make([]time.Time, n)
	dropped := make([]int64, n)
	for i, l := range lines {
		tis[i], attempts[i], seqs[i], streams[i], texts[i], times[i] = l.TIID, l.AttemptID, l.Seq, l.Stream, l.Line, l.Time
		dropped[i] = l.Dropped
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var foreign int
		err := tx.QueryRow(ctx, `
			WITH a AS (SELECT DISTINCT * FROM unnest($2::bigint[], $3::uuid[]) AS a(ti_id, attempt_id))
			SELECT count(*) FROM a
			 WHERE NOT EXISTS (SELECT 1 FROM task_instances t
			                    WHERE t.id = a.ti_id AND t.attempt_id = a.attempt_id AND t.agent_id = $1)
			   AND NOT EXISTS (SELECT 1 FROM events e JOIN task_instances t ON t.run_id = e.run_id
			                    WHERE t.id = a.ti_id AND e.ti_id = a.ti_id AND e.attempt_id = a.attempt_id
			                      AND e.kind = 'ti_claimed' AND e.agent_id = $1)`,
			agentID, tis, attempts).Scan(&foreign)
		if err != nil {
			return err
		}
		if foreign > 0 {
			return fmt.Errorf("%d attempt(s) in the batch were not claimed by agent %d: %w", foreign, agentID, ErrForbidden)
		}
		// The TI row is written only when a new marker counts drops.
		return tx.QueryRow(ctx, `
			WITH ins AS (
			  INSERT INTO task_logs (ti_id, try_number, attempt_id, seq, stream, ts, line, dropped)
			  SELECT l.ti_id,
			         coalesce(CASE WHEN t.attempt_id = l.attempt_id THEN t.try_number END,
			                  (SELECT e.try_number FROM events e
			                    WHERE e.run_id = t.run_id AND e.ti_id = t.id AND e.attempt_id = l.attempt_id
			                      AND e.kind = 'ti_claimed' LIMIT 1), t.try_number),
			         l.attempt_id, l.seq, l.stream, l.ts, l.line, l.dropped
			    FROM unnest($1::bigint[], $2::uuid[], $3::bigint[], $4::text[], $5::timestamptz[], $6::text[], $7::bigint[])
			         AS l(ti_id, attempt_id, seq, stream, ts, line, dropped)
			    JOIN task_instances t ON t.id = l.ti_id
			  ON CONFLICT (attempt_id, seq) DO NOTHING
			  RETURNING ti_id, dropped),
			d AS (SELECT ti_id, sum(dropped) AS n FROM ins WHERE dropped > 0 GROUP BY ti_id),
			upd AS (UPDATE task_instances t SET log_dropped = t.log_dropped + d.n FROM d WHERE t.id = d.ti_id)
			SELECT count(*), coalesce(sum(dropped), 0) FROM ins`,
			tis, attempts, seqs, streams, times, texts, dropped).Scan(&out.Inserted, &out.Dropped)
	})
	if err != nil {
		return LogAppend{}, fmt.Errorf("append logs from agent %d: %w", agentID, err)
	}
	return out, nil
}

// LogAppend is what AppendLogs stored: Inserted new lines, whose gap
// markers counted Dropped lines lost.
type LogAppend struct {
	Inserted int
	Dropped  int64
}

// LogCursor is a position in a TI's log: lines sort by (Try, Seq), the
// order the agents captured them in, and a reader continues after the
// last line it has. The zero cursor is before the first line.
type LogCursor struct {
	Try int
	Seq int64
}

// ReadLogs returns up to limit log lines of task taskID in run runID after
// the cursor, in (try, seq) order. Agents ship each attempt's lines in Seq
// order (gap markers included), so a line never lands behind a reader's
// cursor and a follower sees each line once, in order (issue 23). try 0
// means every try.
// Errors: ErrNotFound, naming the run when it does not exist, else the
// task the run does not have.
func (s *Store) ReadLogs(ctx context.Context, runID int64, taskID string, try int, after LogCursor, limit int) (LogPage, error) {
	if limit <= 0 || limit > MaxLogPage {
		limit = MaxLogPage
	}
	var out LogPage
	var tiID int64
	err := s.pool.QueryRow(ctx, `SELECT id, state, log_dropped FROM task_instances WHERE run_id = $1 AND task_id = $2`, runID, taskID).
		Scan(&tiID, &out.TIState, &out.LogDropped)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, s.missingTask(ctx, runID, taskID)
	}
	if err != nil {
		return out, fmt.Errorf("read logs: %w", err)
	}
	out.Terminal = out.TIState.Terminal()
	// Up to limit lines, of which those that start within MaxLogPageBytes
	// (the first always): octet_length reads a stored line's size without
	// detoasting it, so the lines left out are never read or sent.
	rows, err := s.pool.Query(ctx, `
		SELECT id, try_number, seq, stream, ts, line, dropped, page_rows FROM (
		  SELECT p.*, sum(octet_length(p.line)) OVER w - octet_length(p.line) AS bytes_before,
		         count(*) OVER () AS page_rows
		    FROM (SELECT id, try_number, seq, stream, ts, line, dropped FROM task_logs
		           WHERE ti_id = $1 AND ($2 = 0 OR try_number = $2) AND (try_number, seq) > ($3, $4)
		           ORDER BY try_number, seq
		           LIMIT $5) p
		  WINDOW w AS (ORDER BY p.try_number, p.seq ROWS UNBOUNDED PRECEDING)) q
		 WHERE bytes_before < $6
		 ORDER BY try_number, seq`, tiID, try, after.Try, after.Seq, limit, MaxLogPageBytes)
	if err != nil {
		return out, fmt.Errorf("read logs: %w", err)
	}
	var pageRows int
	out.Lines, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (StoredLogLine, error) {
		var l StoredLogLine
		err := r.Scan(&l.ID, &l.TryNumber, &l.Seq, &l.Stream, &l.Time, &l.Line, &l.Dropped, &pageRows)
		return l, err
	})
	if err != nil {
		return out, fmt.Errorf("read logs: %w", err)
	}
	out.More = len(out.Lines) == limit || len(out.Lines) < pageRows
	return out, nil
}

// missingTask is the error for a task instance that was not found: it
// names the run when the run itself does not exist (`vigil logs 7 x` for
// a run 7 that was never created), else the task. Both wrap ErrNotFound.
func (s *Store) missingTask(ctx context.Context, runID int64, taskID string) error {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE id = $1)`, runID).Scan(&exists); err != nil {
		return fmt.Errorf("read logs of run %d: %w", runID, err)
	}
	if !exists {
		return fmt.Errorf("run %d: %w", runID, ErrNotFound)
	}
	return fmt.Errorf("run %d task %q: %w", runID, taskID, ErrNotFound)
}

// MaxLogPage is the most lines one ReadLogs returns.
const MaxLogPage = 10000

// MaxLogPageBytes bounds the lines of one ReadLogs page: a line that
// starts past it waits for the next page, so a page holds at most this
// much plus one line (64 KiB since the API truncates longer ones; the
// first line is always returned, whatever its size).
const MaxLogPageBytes = 4 << 20

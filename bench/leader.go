package main

// Figures of the leader's loops, read from the vigil process: the idle
// tick and sweeps (its per-pass histograms), reaping planted stale TIs,
// and pruning planted inactive agents (pg_stat_statements).

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
)

// idleWindow is how long the idle figures average over: with the 1 s tick
// and the bench's 2 s sweep interval, about 15 ticks and 7 passes of each
// reaper.
const idleWindow = 15 * time.Second

// idle averages the tick and each reaper's pass over idleWindow with
// nothing to do (the seeded work is stable; see startVigil).
func (e *env) idle(ctx context.Context, v *vigilProc) error {
	e.progress("idle tick and sweeps", "window", idleWindow)
	before, err := scrape(ctx, v.base)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(idleWindow):
	}
	after, err := scrape(ctx, v.base)
	if err != nil {
		return err
	}
	d, n := histMean(before, after, "vigil_scheduler_tick_duration_seconds", "")
	e.out.figure("idle_tick", "idle tick", msf(d), "ms", fmt.Sprintf("mean of %d ticks", n))
	for _, name := range state.Reapers() {
		d, n := histMean(before, after, "vigil_reaper_duration_seconds", fmt.Sprintf(`{reaper=%q}`, name))
		e.out.figure("", "idle sweep "+string(name), msf(d), "ms", fmt.Sprintf("mean of %d passes", n))
	}
	return nil
}

// msf is d in (fractional) milliseconds.
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// staleAgents silent agents hold the planted stale TIs.
const staleAgents = 10

// reapStale plants StaleTIs running TIs of staleAgents agents silent for
// three hours (past the 2 h agent-lost threshold) and asks for a sweep in
// the same transaction (NOTIFY vigil_reap, as `vigil reap` does), then
// times from the commit until none is running.
func (e *env) reapStale(ctx context.Context, v *vigilProc, conn *pgx.Conn) error {
	e.progress("reap stale TIs", "tis", e.cfg.StaleTIs)
	// The agent-lost reaper holds back for one threshold after the term
	// began (post-leadership grace, docs/design.md §6): start after it.
	if wait := time.Until(v.ledAt.Add(syntheticAgentLost + time.Second)); wait > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	ids, err := insertSilentAgents(ctx, conn, "silent-", staleAgents)
	if err != nil {
		return err
	}
	before, err := scrape(ctx, v.base)
	if err != nil {
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := plantRunning(ctx, tx.Conn(), ids, e.cfg.StaleTIs, "3 hours"); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify('vigil_reap', 'sweep')`); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	start := time.Now()
	label := fmt.Sprintf("reap %d stale TIs", e.cfg.StaleTIs)
	left, err := waitNone(ctx, conn, start.Add(e.cfg.PhaseTimeout), 10*time.Millisecond,
		`SELECT count(*) FROM task_instances WHERE agent_id = ANY($1) AND state = 'running'`, ids)
	if err != nil {
		return err
	}
	if left > 0 {
		e.out.missing(label, fmt.Sprintf("CUT at -phase-timeout %s: %d still running", e.cfg.PhaseTimeout, left))
		return nil
	}
	took := time.Since(start)
	// The pass that reaped them records its duration as it returns.
	var after metricsSnap
	for i := 0; i < 100; i++ {
		if after, err = scrape(ctx, v.base); err != nil {
			return err
		}
		if _, n := histMean(before, after, "vigil_reaper_duration_seconds", `{reaper="agent_lost"}`); n > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	passes, n := histMean(before, after, "vigil_reaper_duration_seconds", `{reaper="agent_lost"}`)
	e.out.figure("reap_s", label, took.Seconds(), "s",
		fmt.Sprintf("from the NOTIFY; %d agent_lost passes meanwhile, mean %s ms", n, ms(passes)))
	return nil
}

// waitNone polls the count query every interval until it returns 0 or
// deadline passes, and returns the last count.
func waitNone(ctx context.Context, conn *pgx.Conn, deadline time.Time, every time.Duration, query string, args ...any) (int64, error) {
	for {
		var left int64
		if err := conn.QueryRow(ctx, query, args...).Scan(&left); err != nil {
			return left, err
		}
		if left == 0 || time.Now().After(deadline) {
			return left, nil
		}
		select {
		case <-ctx.Done():
			return left, ctx.Err()
		case <-time.After(every):
		}
	}
}

// prune waits for retention's first pass (a minute into the term) to
// remove the planted inactive agents, then reports the execution time of
// its statement from pg_stat_statements: the DELETE and the unlink of
// their TIs, one statement (adr/0027).
func (e *env) prune(ctx context.Context, v *vigilProc, conn *pgx.Conn) error {
	e.progress("prune agents", "agents", e.cfg.PruneAgents)
	label := fmt.Sprintf("prune %d agents", e.cfg.PruneAgents)
	// Retention's first pass comes a minute into the term.
	deadline := v.ledAt.Add(time.Minute + e.cfg.PhaseTimeout)
	left, err := waitNone(ctx, conn, deadline, 100*time.Millisecond, `SELECT count(*) FROM agents WHERE name LIKE 'prunable-%'`)
	if err != nil {
		return err
	}
	if left > 0 {
		e.out.missing(label, fmt.Sprintf("%d not pruned a minute and -phase-timeout %s into the term", left, e.cfg.PhaseTimeout))
		return nil
	}
	var calls, rows int64
	var total float64
	err = conn.QueryRow(ctx, `
		SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(total_exec_time), 0)::float8, coalesce(sum(rows), 0)::bigint
		  FROM pg_stat_statements
		 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		   AND query ILIKE '%DELETE FROM agents%' AND rows > 0`).Scan(&calls, &total, &rows)
	if err != nil {
		return err
	}
	e.out.figure("prune_ms", label, total, "ms",
		fmt.Sprintf("pg_stat_statements: %d DELETE(s) removing %d agents, unlinking %d TIs", calls, rows, e.cfg.PruneAgents*prunableTIs))
	return nil
}

// statements prints the top statements of the vigil database since the
// last reset, then resets the view for the next vigil process.
func (e *env) statements(ctx context.Context, conn *pgx.Conn, label string) error {
	top, err := topStatements(ctx, conn, 8)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out.w, "top statements (%s), by total execution time:\n", label)
	for _, s := range top {
		fmt.Fprintf(e.out.w, "  %9.0f ms %8d calls %8.3f ms/call %9.1f MB WAL  %s\n", s.TotalMS, s.Calls, s.MeanMS, s.WALBytes/1e6,
			oneLine(s.Query, 100))
	}
	_, err = conn.Exec(ctx, `SELECT pg_stat_statements_reset()`)
	return err
}

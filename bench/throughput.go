package main

// Throughput figures: a burn-down (everything triggered before the agents
// start, timed on the database clock from the first claim to the last
// completion, as River's benchmark times from its client's start to the
// last completion) and a steady window (a feeder keeps a backlog; the
// completions that end inside the window are counted).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// waitCount polls count until it reaches want, or PhaseTimeout passes
// (then it returns the last count and no error: the caller reports a cut
// burn-down), or failed reports an error.
func (e *env) waitCount(ctx context.Context, want int64, every time.Duration, count func() (int64, error), failed func() error) (int64, error) {
	deadline := time.Now().Add(e.cfg.PhaseTimeout)
	for {
		n, err := count()
		if err != nil {
			return n, err
		}
		if n >= want || time.Now().After(deadline) {
			return n, nil
		}
		if err := failed(); err != nil {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(every):
		}
	}
}

// reportBurnDown prints a burn-down's rate from the database clock.
func (e *env) reportBurnDown(ctx context.Context, conn *pgx.Conn, key, label string, runs []int64, want int64) error {
	n, span, err := rate(ctx, conn, runs)
	if err != nil {
		return err
	}
	note := fmt.Sprintf("%d TIs in %.1fs, first claim to last completion", n, span.Seconds())
	if n < want {
		// Cut by -phase-timeout, or some TIs failed: the rate is over
		// what succeeded, and no ratio comes from it.
		key = ""
		note = fmt.Sprintf("CUT: %d of %d TIs succeeded in %.1fs (-phase-timeout %s); no ratio", n, want, span.Seconds(), e.cfg.PhaseTimeout)
	}
	tps := 0.0
	if span > 0 {
		tps = float64(n) / span.Seconds()
	}
	e.out.figure(key, label, tps, "TIs/s", note)
	return nil
}

// steady keeps at least backlog queued TIs of the wide DAG (triggering
// runs through v) and counts the successes of its runs that end within a
// Steady window on the database clock. completed counts the completions
// of the runs triggered so far; the backlog is topped up every interval.
func (e *env) steady(ctx context.Context, v *vigilProc, conn *pgx.Conn, key, label string, backlog int, every time.Duration,
	completed func(runs []int64) (int64, error), failed func() error) ([]int64, error) {
	var runs []int64
	top := func() error {
		done, err := completed(runs)
		if err != nil {
			return err
		}
		need := runsFor(backlog-(len(runs)*wideWidth-int(done)), wideWidth)
		if need > 0 {
			ids, err := triggerParallel(ctx, v, wideDAG, need)
			runs = append(runs, ids...)
			if err != nil {
				return err
			}
		}
		return failed()
	}
	if err := top(); err != nil {
		return runs, err
	}
	t0, err := dbNow(ctx, conn)
	if err != nil {
		return runs, err
	}
	lsn0, err := walLSN(ctx, conn)
	if err != nil {
		return runs, err
	}
	end := time.Now().Add(e.cfg.Steady)
	for time.Now().Before(end) {
		if err := top(); err != nil {
			return runs, err
		}
		select {
		case <-ctx.Done():
			return runs, ctx.Err()
		case <-time.After(every):
		}
	}
	t1, err := dbNow(ctx, conn)
	if err != nil {
		return runs, err
	}
	wal, err := walSince(ctx, conn, lsn0)
	if err != nil {
		return runs, err
	}
	var n int64
	if err := conn.QueryRow(ctx, `
		SELECT count(*) FROM task_instances
		 WHERE run_id = ANY($1) AND state = 'success' AND end_date >= $2 AND end_date < $3`, runs, t0, t1).Scan(&n); err != nil {
		return runs, err
	}
	secs := t1.Sub(t0).Seconds()
	e.out.figure(key, label, float64(n)/secs, "TIs/s",
		fmt.Sprintf("%d TIs in %.1fs, backlog kept ≥ %d", n, secs, backlog))
	if n > 0 {
		e.out.figure(key+"_wal", label+": WAL per TI", wal/float64(n), "bytes",
			"the window, its triggers and the seeded agents' heartbeats included")
	}
	return runs, nil
}

// successes counts the successful TIs of runs.
func successes(ctx context.Context, conn *pgx.Conn, runs []int64) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, `SELECT count(*) FROM task_instances WHERE run_id = ANY($1) AND state = 'success'`, runs).Scan(&n)
	return n, err
}

// backlogFor is the queued work a steady window keeps, from the rate of
// the burn-down before it: about 5 s of work, 2 to 50 runs of wideWidth.
// River's benchmark keeps 75,000 jobs, 3 s of its rate; Vigil's backlog
// is smaller because what is left when the window closes must drain
// before the next figure.
func backlogFor(tisPerSec float64) int {
	return min(max(int(tisPerSec*5)/wideWidth, 2), 50) * wideWidth
}

// triggerParallel triggers n runs of dagID, 4 at a time, and returns the
// ids of those it started.
func triggerParallel(ctx context.Context, v *vigilProc, dagID string, n int) ([]int64, error) {
	var (
		mu   sync.Mutex
		ids  []int64
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 4)
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			got, err := trigger(ctx, v, dagID, 1)
			mu.Lock()
			ids, errs = append(ids, got...), append(errs, err)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}

// synthetic measures the synthetic agents: the burn-down, the steady
// window and the chain's inter-task latency.
func (e *env) synthetic(ctx context.Context, v *vigilProc, conn *pgx.Conn) error {
	nRuns := runsFor(e.cfg.BurnDown, wideWidth)
	e.progress("synthetic burn-down: triggering", "runs", nRuns)
	runs, err := trigger(ctx, v, wideDAG, nRuns)
	if err != nil {
		return err
	}
	want := int64(nRuns * wideWidth)
	e.progress("synthetic burn-down: agents start", "tis", want)
	lsn0, err := walLSN(ctx, conn)
	if err != nil {
		return err
	}
	f, err := e.startFleet(ctx, v)
	if err != nil {
		return err
	}
	defer f.stop(context.WithoutCancel(ctx))
	fleetCount := func() (int64, error) { return f.completed(), nil }
	done, err := e.waitCount(ctx, want, 50*time.Millisecond, fleetCount, f.failed)
	if err != nil {
		return err
	}
	if err := e.reportWAL(ctx, conn, lsn0, done); err != nil {
		return err
	}
	if err := e.reportBurnDown(ctx, conn, "burn", fmt.Sprintf("synthetic burn-down (%d agents x %d)", e.cfg.Agents, e.cfg.Capacity),
		runs, want); err != nil {
		return err
	}
	rounds := e.reportRounds(f, "synthetic burn-down: TIs per claim round", [3]int64{})
	e.progress("synthetic steady", "for", e.cfg.Steady)
	base := f.completed()
	sinceBase := func() (int64, error) { return f.completed() - base, nil }
	steadyRuns, err := e.steady(ctx, v, conn, "steady", fmt.Sprintf("synthetic steady %s", e.cfg.Steady), backlogFor(e.out.vals["burn"]), 100*time.Millisecond,
		func([]int64) (int64, error) { return sinceBase() }, f.failed)
	if err != nil {
		return err
	}
	e.reportRounds(f, "synthetic steady: TIs per claim round", rounds)
	// Drain the backlog, so the chain runs on idle agents. (Not by
	// cancelling the runs: a cancel while agents complete the run's TIs
	// can wait out the scheduler tick's statement timeout.)
	e.progress("synthetic steady: draining the backlog")
	if _, err := e.waitCount(ctx, int64(len(steadyRuns)*wideWidth), 50*time.Millisecond, sinceBase, f.failed); err != nil {
		return err
	}
	if err := e.chain(ctx, v, conn, f.failed); err != nil {
		return err
	}
	return f.stop(ctx)
}

// chain runs the ChainLen-task chain on idle agents and reports the gaps
// between one task's completion and the next one's claim, on the
// database clock.
func (e *env) chain(ctx context.Context, v *vigilProc, conn *pgx.Conn, failed func() error) error {
	e.progress("inter-task latency", "chain", e.cfg.ChainLen)
	ids, err := trigger(ctx, v, chainDAG, 1)
	if err != nil {
		return err
	}
	label := fmt.Sprintf("inter-task latency p50 (%d-task chain)", e.cfg.ChainLen)
	done, err := e.waitCount(ctx, int64(e.cfg.ChainLen), 20*time.Millisecond,
		func() (int64, error) { return successes(ctx, conn, ids) }, failed)
	if err != nil {
		return err
	}
	if done < int64(e.cfg.ChainLen) {
		e.out.missing(label, fmt.Sprintf("CUT at -phase-timeout %s: %d of %d tasks done", e.cfg.PhaseTimeout, done, e.cfg.ChainLen))
		return nil
	}
	rows, err := conn.Query(ctx, `
		SELECT extract(epoch FROM claimed_at - lag(end_date) OVER (ORDER BY ordinal))::float8
		  FROM task_instances WHERE run_id = $1 AND state = 'success' ORDER BY ordinal`, ids[0])
	if err != nil {
		return err
	}
	gaps, err := pgx.CollectRows(rows, pgx.RowTo[*float64])
	if err != nil {
		return err
	}
	var ds []time.Duration
	for _, g := range gaps {
		if g != nil {
			ds = append(ds, time.Duration(*g*float64(time.Second)))
		}
	}
	if len(ds) != e.cfg.ChainLen-1 {
		return fmt.Errorf("chain: %d gaps measured, want %d (did every task succeed?)", len(ds), e.cfg.ChainLen-1)
	}
	note := fmt.Sprintf("%d gaps, completion to next claim", len(ds))
	e.out.figure("chain_p50", label, msf(percentile(ds, 50)), "ms", note)
	e.out.figure("chain_p99", fmt.Sprintf("inter-task latency p99 (%d-task chain)", e.cfg.ChainLen), msf(percentile(ds, 99)), "ms", "")
	return nil
}

// walLSN is the server's current WAL insert position.
func walLSN(ctx context.Context, conn *pgx.Conn) (string, error) {
	var lsn string
	return lsn, conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn)
}

// walSince is the WAL the server wrote since lsn0 (walLSN), in bytes.
func walSince(ctx context.Context, conn *pgx.Conn, lsn0 string) (float64, error) {
	var b float64
	return b, conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::float8`, lsn0).Scan(&b)
}

// reportWAL prints the WAL the server wrote since lsn0 per TI of the n the
// burn-down completed: a figure of the work each TI costs that the
// machine's load does not move (the seeded agents' heartbeats meanwhile
// are in it too, a few percent).
func (e *env) reportWAL(ctx context.Context, conn *pgx.Conn, lsn0 string, n int64) error {
	bytes, err := walSince(ctx, conn, lsn0)
	if err != nil {
		return err
	}
	if n > 0 {
		e.out.figure("burn_wal", "synthetic burn-down: WAL per TI", bytes/float64(n), "bytes",
			fmt.Sprintf("%.1f MB for %d TIs, agents start to last completion", bytes/1e6, n))
	}
	return nil
}

// Command riverbench measures River's no-op job throughput on a PostgreSQL
// database, the way River's own `river bench` does, for `make bench`
// (bench/, docs/performance.md), which runs it beside Vigil on the same
// server and prints the ratio.
//
// It lives in a module of its own so that River never enters Vigil's
// go.mod (adr/0024-bench-beside-river.md). It prints one JSON object per
// mode on stdout ({"mode","jobs","seconds","jobs_per_sec","wal_bytes_per_job"});
// progress goes to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// The worker settings of `river bench` (cmd/river/riverbench in River's
// repository): they are what River's authors found fastest for no-op jobs.
const (
	fetchCooldown     = 2 * time.Millisecond
	fetchPollInterval = 20 * time.Millisecond
	maxWorkers        = 2000
	// insertBatch is the size of one InsertMany call, as in river bench.
	insertBatch = 5000
	// steadyBacklog is the number of available jobs the steady mode keeps
	// topped up, as river bench's continuous inserter does (75,000).
	steadyBacklog = 75000
)

func main() {
	var (
		dbURL    = flag.String("database-url", "", "PostgreSQL URL of an empty database (required)")
		jobs     = flag.Int("jobs", 100000, "burn-down: jobs inserted before the client starts (≥ 1)")
		duration = flag.Duration("duration", 20*time.Second, "steady: how long to work a topped-up queue (≥ 1s)")
	)
	flag.Parse()
	if err := run(*dbURL, *jobs, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		os.Exit(1)
	}
}

func run(dbURL string, jobs int, duration time.Duration) error {
	switch {
	case dbURL == "":
		return errors.New("-database-url: required")
	case jobs < 1:
		return fmt.Errorf("-jobs: %d must be at least 1", jobs)
	case duration < time.Second:
		return fmt.Errorf("-duration: %s must be at least 1s", duration)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("-database-url: %w", err)
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	out := json.NewEncoder(os.Stdout)
	burn, err := burnDown(ctx, pool, driver, jobs)
	if err != nil {
		return fmt.Errorf("burn-down: %w", err)
	}
	if err := out.Encode(burn); err != nil {
		return err
	}
	steady, err := steadyRun(ctx, pool, driver, duration)
	if err != nil {
		return fmt.Errorf("steady: %w", err)
	}
	return out.Encode(steady)
}

// result is one mode's figure.
type result struct {
	Mode       string  `json:"mode"`
	Jobs       int64   `json:"jobs"`
	Seconds    float64 `json:"seconds"`
	JobsPerSec float64 `json:"jobs_per_sec"`
	// WALPerJob is the WAL the server wrote over the timed span, in
	// bytes, per job counted: the work a job costs, which the machine's
	// load does not move (bench/ prints Vigil's per TI beside it).
	WALPerJob float64 `json:"wal_bytes_per_job"`
}

// walLSN is the server's current WAL insert position.
func walLSN(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var lsn string
	return lsn, pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn)
}

// walPerJob is the WAL written since lsn0, in bytes, per job of n.
func walPerJob(ctx context.Context, pool *pgxpool.Pool, lsn0 string, n int64) (float64, error) {
	var b float64
	err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::float8`, lsn0).Scan(&b)
	if err != nil || n == 0 {
		return 0, err
	}
	return b / float64(n), nil
}

// noopArgs is the job: nothing to do.
type noopArgs struct {
	Num int `json:"num"`
}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// newClient empties river_job (as river bench does before each mode) and
// returns a client with river bench's settings and a channel of
// completion events (counted from the completer, as river bench does, so a
// job counts once its completion is written).
func newClient(ctx context.Context, pool *pgxpool.Pool, driver *riverpgxv5.Driver) (*river.Client[pgx.Tx], <-chan *river.Event, func(), error) {
	if err := reset(ctx, pool); err != nil {
		return nil, nil, nil, err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     fetchCooldown,
		FetchPollInterval: fetchPollInterval,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: steadyBacklog,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	return client, events, cancel, nil
}

// reset empties river_job and compacts it.
func reset(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, `TRUNCATE river_job`); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, `VACUUM FULL river_job`)
	return err
}

// insert adds n no-op jobs in InsertMany batches of insertBatch.
func insert(ctx context.Context, client *river.Client[pgx.Tx], n int) error {
	params := make([]river.InsertManyParams, 0, insertBatch)
	for done := 0; done < n; done += len(params) {
		params = params[:0]
		for i := 0; i < insertBatch && done+i < n; i++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{Num: done + i}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return err
		}
	}
	return nil
}

// burnDown inserts jobs, then starts the client and times it from Start
// to the last completion.
func burnDown(ctx context.Context, pool *pgxpool.Pool, driver *riverpgxv5.Driver, jobs int) (result, error) {
	client, events, cancel, err := newClient(ctx, pool, driver)
	if err != nil {
		return result{}, err
	}
	defer cancel()
	if err := insert(ctx, client, jobs); err != nil {
		return result{}, err
	}
	lsn0, err := walLSN(ctx, pool)
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return result{}, err
	}
	defer client.Stop(context.WithoutCancel(ctx))
	var last time.Time
	for worked := 0; worked < jobs; worked++ {
		select {
		case <-ctx.Done():
			return result{}, ctx.Err()
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				return result{}, fmt.Errorf("job %d: %s", ev.Job.ID, ev.Kind)
			}
			last = time.Now()
		}
	}
	secs := last.Sub(start).Seconds()
	wal, err := walPerJob(ctx, pool, lsn0, int64(jobs))
	if err != nil {
		return result{}, err
	}
	fmt.Fprintf(os.Stderr, "riverbench: burn-down of %d jobs in %.2fs (%s to %s)\n", jobs, secs,
		start.UTC().Format(time.RFC3339Nano), last.UTC().Format(time.RFC3339Nano))
	return result{Mode: "burn-down", Jobs: int64(jobs), Seconds: secs, JobsPerSec: float64(jobs) / secs, WALPerJob: wal}, nil
}

// steadyRun keeps at least steadyBacklog jobs available (topping up every
// 250 ms, as river bench does) and counts completions over duration,
// after a first batch is in.
func steadyRun(ctx context.Context, pool *pgxpool.Pool, driver *riverpgxv5.Driver, duration time.Duration) (result, error) {
	client, events, cancel, err := newClient(ctx, pool, driver)
	if err != nil {
		return result{}, err
	}
	defer cancel()
	var inserted, worked atomic.Int64
	if err := insert(ctx, client, steadyBacklog); err != nil {
		return result{}, err
	}
	inserted.Add(steadyBacklog)
	fctx, stopFeed := context.WithCancel(ctx)
	feedErr := make(chan error, 1)
	go func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-fctx.Done():
				feedErr <- nil
				return
			case <-tick.C:
			}
			for inserted.Load()-worked.Load() < steadyBacklog {
				if err := insert(fctx, client, insertBatch); err != nil {
					feedErr <- err
					return
				}
				inserted.Add(insertBatch)
			}
		}
	}()
	lsn0, err := walLSN(ctx, pool)
	if err != nil {
		stopFeed()
		return result{}, err
	}
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		stopFeed()
		return result{}, err
	}
	deadline := time.NewTimer(duration)
	defer deadline.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			stopFeed()
			return result{}, ctx.Err()
		case <-deadline.C:
			break loop
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				stopFeed()
				return result{}, fmt.Errorf("job %d: %s", ev.Job.ID, ev.Kind)
			}
			worked.Add(1)
		}
	}
	n, secs := worked.Load(), time.Since(start).Seconds()
	wal, err := walPerJob(ctx, pool, lsn0, n)
	stopFeed()
	if err != nil {
		return result{}, err
	}
	if err := <-feedErr; err != nil && !errors.Is(err, context.Canceled) {
		return result{}, err
	}
	client.Stop(context.WithoutCancel(ctx))
	fmt.Fprintf(os.Stderr, "riverbench: steady %d jobs in %.2fs (from %s)\n", n, secs, start.UTC().Format(time.RFC3339Nano))
	return result{Mode: "steady", Jobs: n, Seconds: secs, JobsPerSec: float64(n) / secs, WALPerJob: wal}, nil
}

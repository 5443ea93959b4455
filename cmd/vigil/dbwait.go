package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/vigil-sched/vigil/store"
)

// Start-up database wait (docs/operations.md, "Start-up"): a replica
// restarted while PostgreSQL restarts or its link is cut keeps trying
// instead of exiting, so it joins the election once the database is back.
const (
	defaultDatabaseWait = 60 * time.Second
	dbWaitFirstPause    = 100 * time.Millisecond // doubled after every failed try
	dbWaitMaxPause      = 5 * time.Second
	dbWaitMaxTry        = 10 * time.Second // one try's bound, within the time left
)

// addDatabaseWaitFlag adds --database-wait to the flags of server and lite.
func addDatabaseWaitFlag(f *pflag.FlagSet, wait *time.Duration) {
	f.DurationVar(wait, "database-wait", defaultDatabaseWait,
		"at start-up, keep retrying an unreachable database (connect and migrate) this long before exiting; 0: try once")
}

// validateDatabaseWait refuses a negative --database-wait (exit 2).
func validateDatabaseWait(wait time.Duration) error {
	if wait < 0 {
		return usageError("--database-wait: %s is negative; want 0 (try once) or a positive duration such as 60s", wait)
	}
	return nil
}

// waitForDatabase runs try until it succeeds, fails with an error that is
// not store.Unavailable, or wait has passed since the first try; between
// tries it pauses 100ms doubling to 5s and logs each failure at warn.
// Each try gets at most 10s of the time left. wait 0 tries once. A
// cancelled ctx (SIGTERM) ends the wait at once with ctx's error.
func waitForDatabase(ctx context.Context, log *slog.Logger, wait time.Duration, try func(context.Context) error) error {
	if wait == 0 {
		return try(ctx)
	}
	deadline := time.Now().Add(wait)
	pause := dbWaitFirstPause
	for n := 1; ; n++ {
		tctx, cancel := context.WithTimeout(ctx, min(time.Until(deadline), dbWaitMaxTry))
		err := try(tctx)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !store.Unavailable(err):
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("database still unreachable after --database-wait %s (%d tries): %w", wait, n, err)
		}
		log.Warn("database unreachable at start-up; retrying", "try", n, "err", err,
			"left", left.Round(time.Millisecond), "flag", "--database-wait")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(pause, left)):
		}
		pause = min(2*pause, dbWaitMaxPause)
	}
}

// openMigrated migrates url and opens the store on it, both inside
// waitForDatabase: the start-up of server and of lite on an external
// database. On a signal during the wait it returns ctx's error.
func openMigrated(ctx context.Context, log *slog.Logger, wait time.Duration, url string, opts store.Options) (*store.Store, error) {
	var st *store.Store
	err := waitForDatabase(ctx, log, wait, func(ctx context.Context) error {
		if err := store.Migrate(ctx, url); err != nil {
			return err
		}
		s, err := store.OpenWithOptions(ctx, url, opts)
		st = s
		return err
	})
	return st, err
}

// stoppedWaiting words openMigrated's error: nil, a clean stop, when a
// signal ended the start-up (SIGTERM during the wait exits 0 like any
// other stop), else err.
func stoppedWaiting(ctx context.Context, log *slog.Logger, err error) error {
	if ctx.Err() != nil {
		log.Info("shutting down: stopped at start-up before the database was reached", "err", err)
		return nil
	}
	return err
}

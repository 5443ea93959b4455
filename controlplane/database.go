package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vigil-sched/vigil/store"
)

// Start-up database wait (docs/operations.md, "Start-up"): a replica
// restarted while PostgreSQL restarts or its link is cut keeps trying
// instead of exiting, so it joins the election once the database is back.
const (
	// DefaultDatabaseWait is the binary's --database-wait default.
	DefaultDatabaseWait = 60 * time.Second
	dbWaitFirstPause    = 100 * time.Millisecond // doubled after every failed try
	dbWaitMaxPause      = 5 * time.Second
	dbWaitMaxTry        = 10 * time.Second // one try's bound, within the time left
)

// ErrNotMigrated is OpenStore's error, without Migrate, on a database
// whose schema is not current.
var ErrNotMigrated = errors.New("the database schema is not current")

// Database is how OpenStore reaches a store: the one way the binary, the
// bench and the tests open one.
type Database struct {
	// URL is the PostgreSQL URL; required.
	URL string
	// Wait is how long an unreachable database is retried (connect and,
	// with Migrate, migrate); 0 tries once, negative is refused.
	Wait time.Duration
	// Options are the store's pools and leader timeouts.
	Options store.Options
	// Migrate applies the pending migrations first; without it a schema
	// that is not current is refused with ErrNotMigrated.
	Migrate bool
	// Logger receives a warning per failed try; default slog.Default().
	Logger *slog.Logger
}

// OpenStore opens (and with Migrate, first migrates) the store at db.URL,
// retrying while the database is unreachable for up to db.Wait. A
// cancelled ctx ends the wait at once with ctx's error. Errors of a field
// of db are *FieldErrors naming it ("URL", "Wait").
func OpenStore(ctx context.Context, db Database) (*store.Store, error) {
	switch {
	case db.URL == "":
		return nil, fieldError("URL", nil, "required")
	case db.Wait < 0:
		return nil, fieldError("Wait", nil, "%s is negative; want 0 (try once) or a positive duration", db.Wait)
	}
	log := db.Logger
	if log == nil {
		log = slog.Default()
	}
	var st *store.Store
	err := waitForDatabase(ctx, log, db.Wait, func(ctx context.Context) error {
		if db.Migrate {
			if err := store.Migrate(ctx, db.URL); err != nil {
				return err
			}
		}
		s, err := store.OpenWithOptions(ctx, db.URL, db.Options)
		if err != nil {
			return err
		}
		if !db.Migrate {
			ok, err := s.Migrated(ctx)
			if err == nil && !ok {
				err = ErrNotMigrated
			}
			if err != nil {
				s.Close()
				return err
			}
		}
		st = s
		return nil
	})
	return st, err
}

// waitForDatabase runs try until it succeeds, fails with an error that is
// not store.Unavailable, or wait has passed since the first try; between
// tries it pauses 100ms doubling to 5s and logs each failure at warn.
// Each try gets at most 10s of the time left. wait 0 tries once. A
// cancelled ctx (SIGTERM) ends the wait at once with ctx's error. Running
// out of time is a *FieldError of "Wait".
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
			return &FieldError{Field: "Wait", Err: err, text: func(name string) string {
				return fmt.Sprintf("database still unreachable after %s %s (%d tries): %v", name, wait, n, err)
			}}
		}
		log.Warn("database unreachable at start-up; retrying", "try", n, "err", err,
			"left", left.Round(time.Millisecond), "wait", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(pause, left)):
		}
		pause = min(2*pause, dbWaitMaxPause)
	}
}

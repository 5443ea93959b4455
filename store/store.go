// Package store is Vigil's only gateway to PostgreSQL (pgx/v5): schema
// migrations, DAGs, runs, task instances, agents, events, logs, and the
// leader fence. No other package writes SQL (docs/design.md §2).
//
// Every timestamp it writes is now() on the database clock (docs/design.md §3).
// It takes and returns its own types (types.go), with states and reasons
// from package state; the API converts them to the wire protocol's JSON
// shapes at its edge, so the store never depends on the protocol.
package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"

	"github.com/vigil-sched/vigil/state"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// versionTable is tern's bookkeeping table.
const versionTable = "vigil_schema_version"

// Errors returned by store methods; match with errors.Is.
var (
	// ErrNotFound: the named row does not exist.
	ErrNotFound = errors.New("not found")
	// ErrForbidden: the caller (an agent) does not own the attempt.
	ErrForbidden = errors.New("forbidden")
	// ErrConflict: the row is in a state that does not allow the change.
	ErrConflict = errors.New("conflict")
)

// StaleAttemptError reports a completion, heartbeat or log batch for an
// attempt that is no longer current (docs/design.md §4: 409 with a reason).
type StaleAttemptError struct {
	TIID   int64
	Reason state.StopReason // why the attempt is not current
	// State is the TI's current state, or "" when a concurrent change
	// made the guarded write miss (the state is then unknown here).
	State state.TI
}

func (e *StaleAttemptError) Error() string {
	st := string(e.State)
	if st == "" {
		st = "changed"
	}
	return fmt.Sprintf("attempt of task instance %d is not current (%s; state %s)", e.TIID, e.Reason, st)
}

// Store wraps three pgx pools. It is safe for concurrent use.
//
// The main pool serves everything but heartbeats and leader work; the
// heartbeat pool serves statements under a Priority context (Pools). The leader pool, a few
// connections whose sessions carry the LeaderTimeouts, serves only
// LeaderTx and AcquireFence (adr/0010-bounded-leader-waits.md).
type Store struct {
	pool           *pgxpool.Pool
	hb             *pgxpool.Pool // heartbeats: see Pools and Priority
	leader         *pgxpool.Pool
	leaderTimeouts LeaderTimeouts
	url            string
	signals        TestSignals // Options.TestSignals; zero in production
}

// Open connects to databaseURL (a postgres:// URL or DSN) with the zero
// Options: leader timeouts derived from DefaultElectionTTL. It does not
// migrate; call Migrate first.
func Open(ctx context.Context, databaseURL string) (*Store, error) {
	return OpenWithOptions(ctx, databaseURL, Options{})
}

// OpenWithOptions connects to databaseURL (a postgres:// URL or DSN): the
// main and heartbeat pools sized by opts.Pools, and the leader pool, whose sessions
// get opts' resolved LeaderTimeouts. It pings the first and checks the
// settings on the second within 10 s. Errors: invalid timeouts (naming
// the flag and rule, see LeaderTimeouts.Resolve), a bad URL, an
// unreachable database, or a leader session that did not take the
// timeouts. It does not migrate; call Migrate first.
func OpenWithOptions(ctx context.Context, databaseURL string, opts Options) (*Store, error) {
	lt, err := opts.LeaderTimeouts.Resolve(opts.ElectionTTL)
	if err != nil {
		return nil, err
	}
	pools, err := opts.Pools.Resolve()
	if err != nil {
		return nil, err
	}
	pool, hb, err := openPools(ctx, databaseURL, pools, opts.Pools.MaxConns != 0)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		hb.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	leader, err := openLeaderPool(pctx, databaseURL, lt)
	if err != nil {
		pool.Close()
		hb.Close()
		return nil, err
	}
	return &Store{pool: pool, hb: hb, leader: leader, leaderTimeouts: lt, url: databaseURL,
		signals: testSignalsFromEnv(opts.TestSignals)}, nil
}

// Close releases every pool.
func (s *Store) Close() {
	s.pool.Close()
	s.hb.Close()
	s.leader.Close()
}

// Ping checks the database is reachable, bounded by ctx.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// URL is the connection string the store was opened with.
func (s *Store) URL() string { return s.url }

// Now returns the database clock.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&t)
	return t, err
}

func newMigrator(ctx context.Context, conn *pgx.Conn) (*migrate.Migrator, error) {
	m, err := migrate.NewMigrator(ctx, conn, versionTable)
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	if err := m.LoadMigrations(sub); err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	return m, nil
}

// Migrate applies every pending embedded migration to databaseURL. tern
// serialises concurrent migrators with an advisory lock, so replicas that
// start together are safe. See adr/0002-migrations.md.
func Migrate(ctx context.Context, databaseURL string) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close(context.Background())
	m, err := newMigrator(ctx, conn)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// MigrationStatus is the schema version of a database against the
// binary's embedded migrations.
type MigrationStatus struct {
	Current int32    `json:"current"`
	Latest  int32    `json:"latest"`
	Pending []string `json:"pending"`
}

// Status reports the applied and embedded schema versions of databaseURL.
func Status(ctx context.Context, databaseURL string) (MigrationStatus, error) {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return MigrationStatus{}, fmt.Errorf("migration status: connect: %w", err)
	}
	defer conn.Close(context.Background())
	m, err := newMigrator(ctx, conn)
	if err != nil {
		return MigrationStatus{}, fmt.Errorf("migration status: %w", err)
	}
	cur, err := m.GetCurrentVersion(ctx)
	if err != nil {
		return MigrationStatus{}, fmt.Errorf("migration status: %w", err)
	}
	st := MigrationStatus{Current: cur, Latest: int32(len(m.Migrations)), Pending: []string{}}
	for _, mig := range m.Migrations {
		if mig.Sequence > cur {
			st.Pending = append(st.Pending, mig.Name)
		}
	}
	return st, nil
}

// Migrated reports whether the schema is at the binary's latest version;
// used by /readyz.
func (s *Store) Migrated(ctx context.Context) (bool, error) {
	var v int32
	err := s.pool.QueryRow(ctx, `SELECT version FROM `+versionTable).Scan(&v)
	if err != nil {
		return false, err
	}
	entries, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return false, err
	}
	return int(v) == len(entries), nil
}

// isUniqueViolation reports a PostgreSQL unique_violation (23505).
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// micros converts a duration to whole microseconds, the unit SQL
// intervals are built from ($n * interval '1 microsecond').
func micros(d time.Duration) int64 { return d.Microseconds() }

// fromMicros is the inverse of micros, for interval columns read as
// extract(epoch ...) * 1e6.
func fromMicros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// nullMicros is micros, with 0 mapped to SQL NULL (an unset interval).
func nullMicros(d time.Duration) *int64 {
	if d <= 0 {
		return nil
	}
	us := micros(d)
	return &us
}

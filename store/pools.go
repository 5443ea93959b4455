package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Connection pool defaults and bounds (docs/configuration.md,
// "Connections"; adr/0018).
const (
	// DefaultMaxConns is the main pool's size when neither Pools.MaxConns
	// nor the database URL's pool_max_conns asks for more.
	DefaultMaxConns = 20
	// DefaultHeartbeatConns is the size of the heartbeat pool.
	DefaultHeartbeatConns = 4
	maxPoolConns          = 1000
)

// Pools sizes the store's connection pools besides the leader's. MaxConns
// is the main pool (every request but heartbeats and leader work);
// HeartbeatConns is a separate small pool that only statements run under
// a Priority context use (agent heartbeats and their credential check),
// so bulk claims and completions that fill the main pool never make a
// heartbeat wait for a connection. 0 takes the default.
type Pools struct {
	MaxConns       int
	HeartbeatConns int
}

// Resolve fills the defaults and checks the bounds (1..1000 each); the
// error names the flag (--db-max-conns, --db-heartbeat-conns).
func (p Pools) Resolve() (Pools, error) {
	if p.MaxConns == 0 {
		p.MaxConns = DefaultMaxConns
	}
	if p.HeartbeatConns == 0 {
		p.HeartbeatConns = DefaultHeartbeatConns
	}
	switch {
	case p.MaxConns < 1 || p.MaxConns > maxPoolConns:
		return p, fmt.Errorf("db-max-conns: %d is outside 1..%d", p.MaxConns, maxPoolConns)
	case p.HeartbeatConns < 1 || p.HeartbeatConns > maxPoolConns:
		return p, fmt.Errorf("db-heartbeat-conns: %d is outside 1..%d", p.HeartbeatConns, maxPoolConns)
	}
	return p, nil
}

type priorityKey struct{}

// Priority marks ctx so that the store runs its statements on the
// heartbeat pool (Pools.HeartbeatConns). The API marks the heartbeat
// route's requests with it.
func Priority(ctx context.Context) context.Context {
	return context.WithValue(ctx, priorityKey{}, true)
}

// db is the pool for a statement run under ctx: the heartbeat pool under
// Priority, else the main pool.
func (s *Store) db(ctx context.Context) *pgxpool.Pool {
	if ctx.Value(priorityKey{}) != nil {
		return s.hb
	}
	return s.pool
}

// openPools opens the main and the heartbeat pool on databaseURL; the
// URL's pool_max_conns raises the main pool above Pools.MaxConns' default
// only when no explicit size was given.
func openPools(ctx context.Context, databaseURL string, p Pools, explicit bool) (main, hb *pgxpool.Pool, err error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("database-url: %w", err)
	}
	if explicit || int(cfg.MaxConns) < p.MaxConns {
		cfg.MaxConns = int32(p.MaxConns)
	}
	// A name starting with "vigil" tells the ti_left_active trigger
	// (migrations 017, 019) that the write is Vigil's own, which dirties
	// its run itself.
	sessionDefaults(cfg.ConnConfig.RuntimeParams, mainAppName)
	// A replica frozen inside a transaction of these pools (SIGSTOP, a
	// long pause) must not keep its row and key locks: an agent's log
	// lines inserted there, uncommitted, made every other replica's
	// insert of the same lines wait on it for as long as it stayed
	// frozen (e2e TestProAgentsSurviveFrozenLeader). No transaction of
	// these pools waits on anything between its statements.
	if rp := cfg.ConnConfig.RuntimeParams; rp["idle_in_transaction_session_timeout"] == "" {
		rp["idle_in_transaction_session_timeout"] = strconv.FormatInt(MainIdleInTransaction.Milliseconds(), 10)
	}
	hbCfg := cfg.Copy()
	hbCfg.MaxConns = int32(p.HeartbeatConns)
	hbCfg.MinConns = 0
	if main, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	if hb, err = pgxpool.NewWithConfig(ctx, hbCfg); err != nil {
		main.Close()
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	return main, hb, nil
}

// sessionDefaults sets, in a pool's startup parameters rp, what every
// Vigil session runs with unless the database URL names it:
// application_name app, and jit off. Every statement of Vigil's reads or
// writes a bounded set of rows, but the planner prices a correlated
// subquery by its row estimate, which at scale can be far off (at 1M runs
// and 20M TIs, 652 TIs a run against 20): past jit_above_cost it compiles
// the statement first, which took 18.8 of a runs-list page's 23.5 ms
// (docs/performance.md, "The API at a year of history").
func sessionDefaults(rp map[string]string, app string) {
	if rp["application_name"] == "" {
		rp["application_name"] = app
	}
	if rp["jit"] == "" {
		rp["jit"] = "off"
	}
}

// MainIdleInTransaction is idle_in_transaction_session_timeout of the
// main and heartbeat pools' sessions, unless the database URL sets one:
// PostgreSQL ends a session left idle inside a transaction that long,
// releasing its locks. Their transactions run their statements back to
// back, so only a frozen or broken replica reaches it.
const MainIdleInTransaction = 5 * time.Second

// mainAppName is the application_name of the main and heartbeat pools'
// sessions, unless the database URL sets one.
const mainAppName = "vigil"

// DefaultElectionTTL is the election TTL the leader timeouts are derived
// from and checked against when Options.ElectionTTL is zero. Lite has no
// TTL and uses it; it is also Pro's default --election-ttl
// (leader.DefaultElectionTTL is defined as this constant).
const DefaultElectionTTL = 10 * time.Second

// Defaults and bounds of LeaderTimeouts (adr/0010-bounded-leader-waits.md).
const (
	// DefaultLeaderStatementTimeout is the default Statement timeout.
	DefaultLeaderStatementTimeout = 30 * time.Second
	// MaxLeaderStatementTimeout is the longest Statement timeout.
	MaxLeaderStatementTimeout = time.Hour
	// MinLeaderLockTimeout is the floor of the derived default Lock
	// timeout (TTL/4); an explicit value need only be positive and
	// shorter than the TTL.
	MinLeaderLockTimeout = 500 * time.Millisecond
	// MaxLeaderLockTimeout is the ceiling of the derived default Lock
	// timeout: longer lock waits only delay a new leader's retries.
	MaxLeaderLockTimeout = 5 * time.Second
	// MinLeaderIdleTimeout is the floor of the derived default
	// IdleInTransaction timeout (TTL/2).
	MinLeaderIdleTimeout = time.Second
)

// leaderPoolSize is the most connections the leader pool opens. Each
// leader maintenance service (scheduler tick, reconcile, six reapers,
// retention: adr/0012) runs one LeaderTx at a time; one connection each,
// plus one for AcquireFence, means no service waits for another's
// connection, and none competes with the API for the main pool. They are
// opened on demand: a follower keeps only the one opened by Open.
const leaderPoolSize = 10

// leaderAppName is the application_name of leader sessions (unless the
// database URL sets one), so that they stand out in pg_stat_activity.
const leaderAppName = "vigil-leader"

// LeaderTimeouts bound every wait of a leader session in PostgreSQL, so
// that a leader frozen inside a transaction (SIGSTOP, a long GC pause, a
// lost network) cannot keep the leader_fence row locked past its term, and
// a new leader taking the fence cannot wait without bound. They are set as
// session parameters of the leader pool's connections (no extra round trip
// per transaction) and apply to LeaderTx and AcquireFence only; the API's
// pool is unaffected. PostgreSQL counts them in whole milliseconds;
// sub-millisecond parts are rounded up. A zero field means "derive the
// default from the election TTL" (DefaultLeaderTimeouts).
type LeaderTimeouts struct {
	// Lock is lock_timeout (flag --leader-lock-timeout): the longest a
	// leader statement waits for a row or table lock before it fails with
	// SQLSTATE 55P03 (see IsLockTimeout). It makes a new leader's
	// AcquireFence give up, and retry, instead of queueing forever behind
	// an older term's FOR SHARE lock. Must be positive, shorter than the
	// TTL and shorter than Statement. Default TTL/4 within
	// [MinLeaderLockTimeout, MaxLeaderLockTimeout]: 2.5s at a 10s TTL.
	Lock time.Duration
	// Statement is statement_timeout (flag --leader-statement-timeout): the
	// longest one leader statement may run, lock waits included. Must be
	// longer than Lock (or lock_timeout would never fire) and at most
	// MaxLeaderStatementTimeout. Default DefaultLeaderStatementTimeout.
	Statement time.Duration
	// IdleInTransaction is idle_in_transaction_session_timeout (flag
	// --leader-idle-timeout): PostgreSQL terminates a leader session that
	// sits this long inside a transaction without sending a statement,
	// which rolls the transaction back and releases its FOR SHARE lock on
	// the fence. Must be positive and shorter than the TTL, so that a
	// leader frozen mid-transaction has lost its session before its lease
	// can expire and a successor takes the fence. Default TTL/2, at least
	// MinLeaderIdleTimeout: 5s at a 10s TTL. Leader transactions must
	// therefore never wait on anything but their own statements.
	IdleInTransaction time.Duration
}

// DefaultLeaderTimeouts returns the timeouts derived from the election
// TTL (0 means DefaultElectionTTL): Lock TTL/4 clamped to
// [MinLeaderLockTimeout, MaxLeaderLockTimeout], Statement
// DefaultLeaderStatementTimeout, IdleInTransaction max(TTL/2,
// MinLeaderIdleTimeout).
func DefaultLeaderTimeouts(ttl time.Duration) LeaderTimeouts {
	if ttl == 0 {
		ttl = DefaultElectionTTL
	}
	return LeaderTimeouts{
		Lock:              min(max(ttl/4, MinLeaderLockTimeout), MaxLeaderLockTimeout),
		Statement:         DefaultLeaderStatementTimeout,
		IdleInTransaction: max(ttl/2, MinLeaderIdleTimeout),
	}
}

// Resolve fills the zero fields of t from DefaultLeaderTimeouts(ttl) and
// validates the result against ttl (0 means DefaultElectionTTL). Errors
// name the flag, the rule and the numbers; all violations are joined.
func (t LeaderTimeouts) Resolve(ttl time.Duration) (LeaderTimeouts, error) {
	if ttl == 0 {
		ttl = DefaultElectionTTL
	}
	d := DefaultLeaderTimeouts(ttl)
	if t.Lock == 0 {
		t.Lock = d.Lock
	}
	if t.Statement == 0 {
		t.Statement = d.Statement
	}
	if t.IdleInTransaction == 0 {
		t.IdleInTransaction = d.IdleInTransaction
	}
	return t, t.validate(ttl)
}

func (t LeaderTimeouts) validate(ttl time.Duration) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case t.Lock <= 0:
		add("leader-lock-timeout: %s must be positive", t.Lock)
	case t.Lock >= ttl:
		add("leader-lock-timeout: %s must be < the election TTL %s (%s ≥ %s): a new leader retries taking the fence once per lock timeout while it holds its lease",
			t.Lock, ttl, t.Lock, ttl)
	}
	switch {
	case t.Statement <= t.Lock:
		add("leader-statement-timeout: %s must be > leader-lock-timeout %s (%s ≤ %s), or lock waits end as statement timeouts",
			t.Statement, t.Lock, t.Statement, t.Lock)
	case t.Statement > MaxLeaderStatementTimeout:
		add("leader-statement-timeout: %s must be ≤ %s", t.Statement, MaxLeaderStatementTimeout)
	}
	switch {
	case t.IdleInTransaction <= 0:
		add("leader-idle-timeout: %s must be positive", t.IdleInTransaction)
	case t.IdleInTransaction >= ttl:
		add("leader-idle-timeout: %s must be < the election TTL %s (%s ≥ %s): PostgreSQL must end the transaction of a frozen leader before its lease runs out and a new leader takes the fence; the default is TTL/2 = %s",
			t.IdleInTransaction, ttl, t.IdleInTransaction, ttl, max(ttl/2, MinLeaderIdleTimeout))
	}
	return errors.Join(errs...)
}

// Options configures OpenWithOptions. The zero value is what Open uses.
type Options struct {
	// ElectionTTL is the leader election TTL (Pro: --election-ttl) the
	// LeaderTimeouts are derived from and validated against; 0 means
	// DefaultElectionTTL (Lite).
	ElectionTTL time.Duration
	// LeaderTimeouts bound the sessions of LeaderTx and AcquireFence; zero
	// fields take DefaultLeaderTimeouts(ElectionTTL).
	LeaderTimeouts LeaderTimeouts
	// Pools sizes the main and the heartbeat pools; zero fields take the
	// defaults (Pools.Resolve).
	Pools Pools
	// TestSignals are for tests only; production leaves the zero value.
	TestSignals TestSignals
}

// LeaderTimeouts returns the resolved timeouts of the leader sessions.
func (s *Store) LeaderTimeouts() LeaderTimeouts { return s.leaderTimeouts }

// IsLockTimeout reports whether err is (or wraps) PostgreSQL's
// lock_not_available (SQLSTATE 55P03): a statement gave up waiting for a
// lock after lock_timeout. From AcquireFence it means an older term's
// leader transaction still holds the fence row; retry.
func IsLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// pgMillis renders d as whole milliseconds, rounded up, the unit of
// PostgreSQL's timeout settings.
func pgMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// leaderSettings maps each timeout setting to its value in milliseconds.
func leaderSettings(t LeaderTimeouts) map[string]int64 {
	return map[string]int64{
		"lock_timeout":                        pgMillis(t.Lock),
		"statement_timeout":                   pgMillis(t.Statement),
		"idle_in_transaction_session_timeout": pgMillis(t.IdleInTransaction),
	}
}

// openLeaderPool opens the small pool LeaderTx and AcquireFence use, with
// the timeouts as startup parameters, and checks on one connection that
// PostgreSQL applied them.
func openLeaderPool(ctx context.Context, databaseURL string, t LeaderTimeouts) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("database-url: %w", err)
	}
	cfg.MaxConns, cfg.MinConns = leaderPoolSize, 0
	rp := cfg.ConnConfig.RuntimeParams
	for name, ms := range leaderSettings(t) {
		rp[name] = strconv.FormatInt(ms, 10)
	}
	sessionDefaults(rp, leaderAppName)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect (leader pool): %w", err)
	}
	if err := checkLeaderSettings(ctx, pool, t); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// checkLeaderSettings reads the timeouts back from a leader session. A
// pooler that drops startup parameters (pgbouncer's
// ignore_startup_parameters) would otherwise silently remove the bound.
func checkLeaderSettings(ctx context.Context, pool *pgxpool.Pool, t LeaderTimeouts) error {
	rows, err := pool.Query(ctx, `
		SELECT name, setting FROM pg_settings
		 WHERE name IN ('lock_timeout', 'statement_timeout', 'idle_in_transaction_session_timeout')`)
	if err != nil {
		return fmt.Errorf("connect to database (leader pool): %w", err)
	}
	got := map[string]string{}
	for rows.Next() {
		var name, setting string
		if err := rows.Scan(&name, &setting); err != nil {
			rows.Close()
			return fmt.Errorf("read leader session settings: %w", err)
		}
		got[name] = setting
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read leader session settings: %w", err)
	}
	for name, want := range leaderSettings(t) {
		if got[name] != strconv.FormatInt(want, 10) {
			return fmt.Errorf("leader session: PostgreSQL reports %s = %q ms, want %d ms: the connection's startup parameters did not take effect (a pooler such as pgbouncer may drop them; connect to PostgreSQL directly or through session pooling)",
				name, got[name], want)
		}
	}
	return nil
}

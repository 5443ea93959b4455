package store

import (
	"context"
	"fmt"

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

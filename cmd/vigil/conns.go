package main

import (
	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/store"
)

// connOpts are the database connection flags of lite and server
// (docs/configuration.md, "Connections").
type connOpts struct {
	pools      store.Pools
	agentConns int
}

// bulkReserve is how many main-pool connections the default
// --db-agent-conns leaves to operator, health and other requests.
const bulkReserve = 4

// addConnFlags adds the pool-size and per-route-class flags to cmd.
func addConnFlags(cmd *cobra.Command, c *connOpts) {
	f := cmd.Flags()
	f.IntVar(&c.pools.MaxConns, "db-max-conns", store.DefaultMaxConns,
		"size of the main PostgreSQL pool of this process (1..1000); a pool_max_conns in --database-url is overridden")
	f.IntVar(&c.pools.HeartbeatConns, "db-heartbeat-conns", store.DefaultHeartbeatConns,
		"size of the separate pool that serves only agent heartbeats (1..1000)")
	f.IntVar(&c.agentConns, "db-agent-conns", 0,
		"agent claims, completions and log batches using the main pool at once (1..db-max-conns); 0: db-max-conns minus 4, at least 1")
}

// resolve checks the flags and returns the pools and the bulk limit of
// the API; errors name the flag and the rule (exit 2).
func (c connOpts) resolve() (store.Pools, int, error) {
	// 0 would take the store's default: on the command line it is out of
	// bounds like any other size below 1.
	if c.pools.MaxConns < 1 {
		return c.pools, 0, usageError("--db-max-conns: %d is outside 1..1000", c.pools.MaxConns)
	}
	if c.pools.HeartbeatConns < 1 {
		return c.pools, 0, usageError("--db-heartbeat-conns: %d is outside 1..1000", c.pools.HeartbeatConns)
	}
	p, err := c.pools.Resolve()
	if err != nil {
		return p, 0, usageError("--%v", err)
	}
	bulk := c.agentConns
	switch {
	case bulk == 0:
		bulk = max(1, p.MaxConns-bulkReserve)
	case bulk < 1 || bulk > p.MaxConns:
		return p, 0, usageError("--db-agent-conns: %d is outside 1..%d (--db-max-conns)", bulk, p.MaxConns)
	}
	return p, bulk, nil
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/controlplane"
	"github.com/vigil-sched/vigil/store"
)

// connOpts are the database connection flags of lite and server
// (docs/configuration.md, "Connections").
type connOpts struct {
	pools      store.Pools
	agentConns int
}

// addConnFlags adds the pool-size and per-route-class flags to cmd.
func addConnFlags(cmd *cobra.Command, c *connOpts) {
	f := cmd.Flags()
	f.IntVar(&c.pools.MaxConns, "db-max-conns", store.DefaultMaxConns,
		"size of the main PostgreSQL pool of this process (1..1000); a pool_max_conns in --database-url is overridden")
	f.IntVar(&c.pools.HeartbeatConns, "db-heartbeat-conns", store.DefaultHeartbeatConns,
		"size of the separate pool that serves only agent heartbeats (1..1000)")
	f.IntVar(&c.agentConns, "db-agent-conns", 0,
		fmt.Sprintf("agent claims, completions and log batches using the main pool at once (1..db-max-conns); 0: db-max-conns minus %d, at least 1",
			controlplane.BulkReserve))
}

// validate checks the flags; errors name the flag and the rule (exit 2).
func (c connOpts) validate() error {
	// 0 would take the store's default: on the command line it is out of
	// bounds like any other size below 1.
	if c.pools.MaxConns < 1 {
		return usageError("--db-max-conns: %d is outside 1..1000", c.pools.MaxConns)
	}
	if c.pools.HeartbeatConns < 1 {
		return usageError("--db-heartbeat-conns: %d is outside 1..1000", c.pools.HeartbeatConns)
	}
	p, err := c.pools.Resolve()
	if err != nil {
		return usageError("--%v", err)
	}
	if c.agentConns != 0 && (c.agentConns < 1 || c.agentConns > p.MaxConns) {
		return usageError("--db-agent-conns: %d is outside 1..%d (--db-max-conns)", c.agentConns, p.MaxConns)
	}
	return nil
}

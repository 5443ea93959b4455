package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/vigil-sched/vigil/controlplane"
)

// Start-up database wait (docs/operations.md, "Start-up"): a replica
// restarted while PostgreSQL restarts or its link is cut keeps trying
// instead of exiting (controlplane.Config.DatabaseWait).

// addDatabaseWaitFlag adds --database-wait to the flags of server and lite.
func addDatabaseWaitFlag(f *pflag.FlagSet, wait *time.Duration) {
	f.DurationVar(wait, "database-wait", controlplane.DefaultDatabaseWait,
		"at start-up, keep retrying an unreachable database (connect and migrate) this long before exiting; 0: try once")
}

// validateDatabaseWait refuses a negative --database-wait (exit 2).
func validateDatabaseWait(wait time.Duration) error {
	if wait < 0 {
		return usageError("--database-wait: %s is negative; want 0 (try once) or a positive duration such as 60s", wait)
	}
	return nil
}

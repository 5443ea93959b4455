package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/agent"
)

// newSuperviseCmd is the hidden `vigil __supervise` the agent starts each
// task under (agent.Supervise). It parses its own arguments and skips the
// root's config binding: its environment is the task's, which must not
// configure it.
func newSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		Use:                agent.SupervisorCommand + " --parent-pid PID --kill-grace D -- COMMAND...",
		Short:              "Run one task for an agent and kill its process group when the agent dies (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		PersistentPreRunE:  func(*cobra.Command, []string) error { return nil },
		Run: func(_ *cobra.Command, args []string) {
			os.Exit(agent.Supervise(args))
		},
	}
}

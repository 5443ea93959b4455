package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/agent/supervisor"
)

// newSuperviseCmd is the hidden `vigil __supervise` the agent starts each
// task under when no vigil-supervise is installed beside vigil
// (supervisor.Run, the same body). It parses its own arguments and skips
// the root's config binding: its environment is the task's, which must
// not configure it. main dispatches it before building the command tree;
// this entry documents it and serves a caller that goes through cobra.
func newSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		Use:                supervisor.Subcommand + " --parent-pid PID --kill-grace D -- COMMAND...",
		Short:              "Run one task for an agent and kill its process group when the agent dies (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		PersistentPreRunE:  func(*cobra.Command, []string) error { return nil },
		Run: func(_ *cobra.Command, args []string) {
			os.Exit(supervisor.Run(args))
		},
	}
}

package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/agent/supervisor"
)

// newSuperviseCmd is the hidden `vigil __supervise` the agent runs its
// tasks under when no vigil-supervise is installed beside vigil
// (supervisor.Run, the same body). It parses its own arguments and skips
// the root's config binding: its environment is the agent's, which
// must not configure it again; each task's comes with its start request. main dispatches it before building the command tree;
// this entry documents it and serves a caller that goes through cobra.
func newSuperviseCmd() *cobra.Command {
	return &cobra.Command{
		Use:                supervisor.Subcommand + " --parent-pid PID --kill-grace D",
		Short:              "Run an agent's tasks and kill their process groups when the agent dies (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		PersistentPreRunE:  func(*cobra.Command, []string) error { return nil },
		Run: func(_ *cobra.Command, args []string) {
			os.Exit(supervisor.Run(args))
		},
	}
}

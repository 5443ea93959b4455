// Command vigil is Vigil's single binary (DESIGN §9): the Lite and Pro
// control planes, the agent, and the operator CLI. It stays thin: flags →
// config → wiring; the work lives in the packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes (DESIGN §9).
const (
	exitOK        = 0
	exitError     = 1
	exitUsage     = 2
	exitRunFailed = 3
)

// exitCodeError carries a specific process exit code out of a command.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

// usageError marks bad arguments or flag values: exit code 2.
func usageError(format string, args ...any) error {
	return &exitCodeError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd()
	err := root.ExecuteContext(ctx)
	os.Exit(exitCode(err))
}

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	err = explainError(err)
	fmt.Fprintln(os.Stderr, "vigil:", err)
	var ec *exitCodeError
	if errors.As(err, &ec) {
		return ec.code
	}
	return exitError
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "vigil",
		Short:         "Vigil: a workflow scheduler control plane that keeps run state honest",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return bindConfig(cmd)
		},
	}
	root.PersistentFlags().String("config", "", "YAML config file; keys are the flag names (flag > env > file > default)")
	root.PersistentFlags().String("log-format", "auto", "log output: auto (tint on a terminal, else json), text or json")
	root.PersistentFlags().String("log-level", "info", "log level: debug, info, warn or error")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitCodeError{code: exitUsage, err: err} })
	root.AddCommand(
		newLiteCmd(),
		newServerCmd(),
		newAgentCmd(),
		newAgentsCmd(),
		newDagsCmd(),
		newRunsCmd(),
		newLogsCmd(),
		newReapCmd(),
		newThresholdsCmd(),
		newMigrateCmd(),
		newFenceCmd(),
		newVersionCmd(),
		newSuperviseCmd(),
	)
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "vigil", version)
			return nil
		},
	}
}

// noArgs rejects positional arguments with a usage error (exit 2).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}

// exactArgs requires n positional arguments, naming them in the error.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usageError("%s needs %d argument(s) %v, got %d", cmd.CommandPath(), len(names), names, len(args))
		}
		return nil
	}
}

// Command vigil is Vigil's single binary (docs/design.md §9): the Lite and Pro
// control planes, the agent, and the operator CLI. It stays thin: flags →
// config → controlplane.Start (or agent.New, or an API client), and the
// output; the work lives in the packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/agent/supervisor"
	"github.com/vigil-sched/vigil/api/client"
	"github.com/vigil-sched/vigil/api/protocol"
)

// Exit codes (docs/design.md §9).
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
	// A task's supervisor starts once per task instance: it skips the
	// command tree (every command, flag and example of the CLI), which
	// it does not use (newSuperviseCmd). Package initialisation it cannot
	// skip; vigil-supervise, installed beside vigil, has none to speak of.
	if len(os.Args) > 1 && os.Args[1] == supervisor.Subcommand {
		os.Exit(supervisor.Run(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(exitCode(execute(ctx, newRootCmd())))
}

// execute runs root and words its error for the user: a flag's value
// that came from the environment or the config file is named with its
// source, and an unreachable server gets a hint.
func execute(ctx context.Context, root *cobra.Command) error {
	cmd, err := root.ExecuteContextC(ctx)
	if cmd != nil {
		err = nameValueSources(cmd, err)
	}
	return explainError(err)
}

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
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
	root.SetFlagErrorFunc(flagParseError)
	root.AddCommand(
		newLiteCmd(),
		newServerCmd(),
		newAgentCmd(),
		newAgentsCmd(),
		newDagsCmd(),
		newRunsCmd(),
		newTasksCmd(),
		newLogsCmd(),
		newReapCmd(),
		newAtRiskCmd(),
		newThresholdsCmd(),
		newSecretsCmd(),
		newWebhooksCmd(),
		newNotificationsCmd(),
		newPoolsCmd(),
		newAuditCmd(),
		newWhoamiCmd(),
		newMigrateCmd(),
		newFenceCmd(),
		newVersionCmd(),
		newSuperviseCmd(),
	)
	root.InitDefaultCompletionCmd() // now, so that it has examples too
	applyExamples(root)
	return root
}

// versionReport is `vigil version -o json|yaml`: the client's version and,
// unless --client, the server's (GET /v1/version) or why it is unknown.
type versionReport struct {
	Client protocol.VersionInfo  `json:"client"`
	Server *protocol.VersionInfo `json:"server,omitempty"`
	// ServerError says why the server's version is missing.
	ServerError string `json:"server_error,omitempty"`
}

func newVersionCmd() *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client's version and the server's",
		Long: `Print this binary's version and, unless --client, the version of the server
at --server (GET /v1/version, which needs no token). An unreachable server
is reported and exits 1 after the client's version has been printed.`,
		Args: noArgs,
	}
	o := addClientFlags(cmd)
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only the client's version; do not contact the server")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		rep := versionReport{Client: protocol.VersionInfo{Version: version}}
		var serverErr error
		if !clientOnly {
			serverErr = func() error {
				httpClient, err := o.tls.httpClient(client.DefaultTimeout)
				if err != nil {
					return err
				}
				c, err := client.New(o.server, "", httpClient) // an open endpoint: no token
				if err != nil {
					return usageError("--%v", err)
				}
				var v protocol.VersionInfo
				if err := c.Do(cmd.Context(), http.MethodGet, "/v1/version", nil, &v); err != nil {
					return err
				}
				rep.Server = &v
				return nil
			}()
			if serverErr != nil {
				rep.ServerError = serverErr.Error()
			}
		}
		out := cmd.OutOrStdout()
		switch {
		case o.structured():
			if err := o.printData(out, rep); err != nil {
				return err
			}
		case o.output == outputName:
			fmt.Fprintln(out, version)
		default:
			fmt.Fprintln(out, "client: vigil", version)
			if rep.Server != nil {
				fmt.Fprintln(out, "server: vigil", rep.Server.Version, "at", o.server)
			}
		}
		return serverErr
	}
	return cmd
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

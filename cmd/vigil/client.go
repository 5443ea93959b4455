package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/client"
)

// defaultServerURL is where client subcommands look for the API (docs/design.md §9).
const defaultServerURL = "http://127.0.0.1:8080"

// operatorTokenFile is where Lite writes its generated operator token,
// under $VIGIL_DATA_DIR (default .vigil).
const operatorTokenFile = "operator.token"

// Output formats of -o/--output.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// clientOpts are the flags shared by the client subcommands.
type clientOpts struct {
	server, token, output string
	tokenFile             *secretFile // --token-file
	tls                   clientTLSOpts
}

// addClientFlags adds --server, --token and -o/--output to cmd: as
// persistent flags on a group command (no RunE), as local flags on a leaf.
// bindConfig fills them from VIGIL_SERVER, VIGIL_TOKEN and VIGIL_OUTPUT.
func addClientFlags(cmd *cobra.Command) *clientOpts {
	o := &clientOpts{}
	flags := cmd.Flags()
	if !cmd.Runnable() {
		flags = cmd.PersistentFlags()
	}
	flags.StringVar(&o.server, "server", defaultServerURL, "Vigil API URL (env VIGIL_SERVER)")
	flags.StringVar(&o.token, "token", "", "operator token (env VIGIL_TOKEN; prefer --token-file; default: the token Lite writes to $VIGIL_DATA_DIR/operator.token, .vigil/operator.token)")
	o.tokenFile = addSecretFile(flags, "token", &o.token)
	addClientTLSFlags(flags, &o.tls)
	flags.StringVarP(&o.output, "output", "o", outputTable, "output format: table, json, yaml, wide or name (json and yaml have the API's shape)")
	return o
}

// groupCmd makes cmd, a command that only holds subcommands, reject an
// unknown subcommand with a usage error (exit 2) and print its help when
// run bare. Call it after addClientFlags, which puts the flags of a
// command without RunE on its subcommands.
func groupCmd(cmd *cobra.Command) {
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError("unknown command %q for %q; see %s --help", args[0], cmd.CommandPath(), cmd.CommandPath())
		}
		return nil
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// json reports whether -o json was asked for.
func (o *clientOpts) json() bool { return o.output == outputJSON }

// validate checks -o.
func (o *clientOpts) validate() error { return validOutput(o.output) }

// newClient validates the flags and builds the API client. Without
// --token or VIGIL_TOKEN it reads the operator token Lite wrote under
// $VIGIL_DATA_DIR (default .vigil).
func (o *clientOpts) newClient() (*client.Client, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := o.tokenFile.resolve(); err != nil {
		return nil, err
	}
	token := strings.TrimSpace(o.token)
	if token == "" {
		var err error
		if token, err = fallbackToken(); err != nil {
			return nil, err
		}
	}
	if token == "" {
		return nil, usageError("--token: required (or --token-file, or VIGIL_TOKEN; Lite writes one to .vigil/operator.token)")
	}
	httpClient, err := o.tls.httpClient(client.DefaultTimeout)
	if err != nil {
		return nil, err
	}
	c, err := client.New(o.server, token, httpClient)
	if err != nil {
		return nil, usageError("--%v", err)
	}
	return c, nil
}

// explainError adds what the user can do about err, when the CLI knows:
// a server that could not be reached gets a hint on pointing at another.
// Other errors are returned as they are.
func explainError(err error) error {
	var ue *client.UnreachableError
	var op *net.OpError
	var dns *net.DNSError
	// Only when nothing answered: a TLS failure, say, needs another remedy.
	if errors.As(err, &ue) && ((errors.As(err, &op) && op.Op == "dial") || errors.As(err, &dns)) {
		return &hintedError{err: err, hint: "is it running? Point the CLI at another server with --server URL or VIGIL_SERVER=URL"}
	}
	return err
}

// hintedError is an error with a hint printed on the line after it.
type hintedError struct {
	err  error
	hint string
}

func (e *hintedError) Error() string { return e.err.Error() + "\n  " + e.hint }
func (e *hintedError) Unwrap() error { return e.err }

// fallbackToken reads <data dir>/operator.token; "" when there is none.
func fallbackToken() (string, error) {
	dir := os.Getenv("VIGIL_DATA_DIR")
	if dir == "" {
		dir = ".vigil"
	}
	path := filepath.Join(dir, operatorTokenFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read operator token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

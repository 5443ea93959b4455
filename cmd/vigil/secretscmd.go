package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/secrets"
)

// `vigil secrets set | list | delete` manages the cluster's named
// secrets over the API (docs/security.md "Secrets"), which DAGs name in a
// task's env as {secret: NAME}. Not to be confused with secrets.go, the
// --<flag>-file twins through which Vigil's own tokens are read.

// newSecretsCmd is `vigil secrets set | list | delete`.
func newSecretsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "secrets", Short: "Manage the named secrets a task's env may name as {secret: NAME}"}
	o := addClientFlags(cmd)
	groupCmd(cmd)
	cmd.AddCommand(newSecretsSetCmd(o), newSecretsListCmd(o), newSecretsDeleteCmd(o))
	return cmd
}

// checkSecretName refuses a bad NAME argument before any request.
func checkSecretName(name string) error {
	if !secrets.ValidName(name) {
		return usageError("NAME %q: must be %s", name, secrets.NameRule)
	}
	return nil
}

// secretPath is the API path of the secret name.
func secretPath(name string) string { return "/v1/secrets/" + url.PathEscape(name) }

func newSecretsSetCmd(o *clientOpts) *cobra.Command {
	var fromFile string
	set := &cobra.Command{
		Use:   "set NAME",
		Short: "Create a secret, or store a new version of it, from stdin or --from-file (the value is never printed)",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := checkSecretName(name); err != nil {
				return err
			}
			value, err := readSecretValue(cmd.InOrStdin(), fromFile)
			if err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			var resp protocol.SetSecretResponse
			if err := c.Do(cmd.Context(), http.MethodPut, secretPath(name), protocol.SetSecretRequest{Value: value}, &resp); err != nil {
				return err
			}
			what := "updated"
			if resp.Created {
				what = "created"
			}
			return o.render(cmd.OutOrStdout(), view{
				api: resp,
				table: func(w io.Writer, _ bool) error {
					_, err := fmt.Fprintf(w, "secret %s %s (version %d)\n", resp.Name, what, resp.Version)
					return err
				},
				names: func() []string { return []string{resp.Name} },
			})
		},
	}
	set.Flags().StringVar(&fromFile, "from-file", "", "read the value from this file instead of stdin (taken as is: a trailing newline is part of it)")
	return set
}

// readSecretValue reads a value from the file path, or from stdin when
// path is "". From stdin one trailing newline (as `echo` or a terminal
// adds) is dropped; a file is taken as is. Errors name the source and
// the rule (secrets.CheckValue) and never quote the value.
func readSecretValue(stdin io.Reader, path string) (string, error) {
	src, r := "stdin", stdin
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return "", usageError("--from-file %s: %v", path, pathErr(err))
		}
		defer f.Close()
		src, r = "--from-file "+path, f
	}
	b, err := io.ReadAll(io.LimitReader(r, secrets.MaxValueBytes+2))
	if err != nil {
		return "", usageError("%s: %v", src, err)
	}
	if path == "" {
		b = []byte(strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"))
	}
	if err := secrets.CheckValue(b); err != nil {
		return "", usageError("%s: the value %v", src, err)
	}
	return string(b), nil
}

func newSecretsListCmd(o *clientOpts) *cobra.Command {
	return listCmd(o, "List the secrets: names, versions and times, never values", "/v1/secrets", func(list *protocol.SecretList) view {
		if list.Secrets == nil {
			list.Secrets = []protocol.Secret{}
		}
		return view{
			api: list,
			table: func(w io.Writer, _ bool) error {
				tw := newTable(w)
				tableRow(tw, "NAME", "VERSION", "CREATED", "UPDATED")
				for _, s := range list.Secrets {
					tableRow(tw, s.Name, fmt.Sprint(s.Version), fmtTime(s.CreatedAt), fmtTime(s.UpdatedAt))
				}
				return tw.Flush()
			},
			names: namesOf(list.Secrets, func(s protocol.Secret) string { return s.Name }),
		}
	})
}

func newSecretsDeleteCmd(o *clientOpts) *cobra.Command {
	return named{"secret", checkSecretName, secretPath}.deleteCmd(o, "Delete a secret; a task claimed later that names it fails with reason secret_missing")
}

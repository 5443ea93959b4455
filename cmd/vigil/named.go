package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
)

// named is a kind of thing the API keeps by name under one path (a pool,
// a secret, a webhook): how its commands check a NAME argument before
// any request and build the thing's API path.
type named struct {
	noun  string              // "pool": the word its messages use
	check func(string) error  // a usageError naming the rule, or nil
	path  func(string) string // the API path of one, escaped
}

// deleteCmd is `vigil <nouns> delete NAME`: DELETE on the thing's path,
// then "<noun> NAME deleted". short says what deleting it does.
func (n named) deleteCmd(o *clientOpts, short string) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: short,
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := n.check(name); err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			if err := c.Do(cmd.Context(), http.MethodDelete, n.path(name), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s deleted\n", n.noun, name)
			return nil
		},
	}
}

// listCmd is `vigil <nouns> list`: GET path into an L, then render the
// view show makes of it. show also turns a missing list into an empty
// one, so that -o json prints [] rather than null.
func listCmd[L any](o *clientOpts, short, path string, show func(*L) view) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: short,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.newClient()
			if err != nil {
				return err
			}
			var list L
			if err := c.Do(cmd.Context(), http.MethodGet, path, nil, &list); err != nil {
				return err
			}
			return o.render(cmd.OutOrStdout(), show(&list))
		},
	}
}

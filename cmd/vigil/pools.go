package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
)

// `vigil pools set | list | delete` manages the task pools (docs/pools.md)
// a task names with its pool field; `vigil dags delete` is here too, the
// other part of the same change (issue 25).

// newPoolsCmd is `vigil pools set | list | delete`.
func newPoolsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "pools", Short: "Manage the task pools that cap running tasks across DAGs"}
	o := addClientFlags(cmd)
	groupCmd(cmd)
	cmd.AddCommand(newPoolsSetCmd(o), newPoolsListCmd(o), newPoolsDeleteCmd(o))
	return cmd
}

// checkPoolName refuses a bad NAME argument before any request.
func checkPoolName(name string) error {
	if !dag.ValidPoolName(name) {
		return usageError("NAME %q %s", name, dag.PoolNameRule)
	}
	return nil
}

// poolPath is the API path of the pool name.
func poolPath(name string) string { return "/v1/pools/" + url.PathEscape(name) }

func newPoolsSetCmd(o *clientOpts) *cobra.Command {
	var slots int
	var description string
	set := &cobra.Command{
		Use:   "set NAME --slots N",
		Short: "Create a task pool, or change its slots (a pool shrunk below its running tasks admits none until they drain)",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := checkPoolName(name); err != nil {
				return err
			}
			if !cmd.Flags().Changed("slots") {
				return usageError("--slots is required: the pool's slots, 0 or more")
			}
			req := protocol.SetPoolRequest{Slots: &slots}
			if cmd.Flags().Changed("description") {
				req.Description = &description
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			var resp protocol.SetPoolResponse
			if err := c.Do(cmd.Context(), http.MethodPut, poolPath(name), req, &resp); err != nil {
				return err
			}
			what := "updated"
			if resp.Created {
				what = "created"
			}
			return o.render(cmd.OutOrStdout(), view{
				api: resp,
				table: func(w io.Writer, _ bool) error {
					_, err := fmt.Fprintf(w, "pool %s %s: %d slots, %d running, %s queued\n",
						resp.Name, what, resp.Slots, resp.Running, queuedText(resp.Pool))
					return err
				},
				names: func() []string { return []string{resp.Name} },
			})
		},
	}
	set.Flags().IntVar(&slots, "slots", 0, "the pool's slots: how many of its tasks may run at once (required)")
	set.Flags().StringVar(&description, "description", "", "what the pool protects (kept when omitted)")
	return set
}

// queuedText is a pool's queued count, "10000+" when it was capped.
func queuedText(p protocol.Pool) string {
	if p.QueuedCapped {
		return fmt.Sprintf("%d+", p.Queued)
	}
	return fmt.Sprint(p.Queued)
}

func newPoolsListCmd(o *clientOpts) *cobra.Command {
	return listCmd(o, "List the task pools: slots, running and queued tasks", "/v1/pools", func(list *protocol.PoolList) view {
		if list.Pools == nil {
			list.Pools = []protocol.Pool{}
		}
		return view{
			api: list,
			table: func(w io.Writer, _ bool) error {
				tw := newTable(w)
				tableRow(tw, "NAME", "SLOTS", "RUNNING", "QUEUED", "DESCRIPTION")
				for _, p := range list.Pools {
					tableRow(tw, p.Name, fmt.Sprint(p.Slots), fmt.Sprint(p.Running), queuedText(p), p.Description)
				}
				return tw.Flush()
			},
			names: namesOf(list.Pools, func(p protocol.Pool) string { return p.Name }),
		}
	})
}

func newPoolsDeleteCmd(o *clientOpts) *cobra.Command {
	return named{"pool", checkPoolName, poolPath}.deleteCmd(o, "Delete a task pool that no DAG names and no unfinished task belongs to")
}

// newDagsDeleteCmd is `vigil dags delete DAG_ID [--yes]`.
func newDagsDeleteCmd(o *clientOpts) *cobra.Command {
	var yes bool
	del := &cobra.Command{
		Use:   "delete DAG_ID",
		Short: "Delete a DAG and its schedule; refused while it has queued or running runs",
		Long: `Delete a DAG and its schedule; refused while it has queued or running runs.
Its ended runs, with their task instances, events and logs, stay until
retention removes them. Without --yes it asks first on a terminal, and
refuses when stdin is not one.`,
		Args: exactArgs("DAG_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dagID := args[0]
			if !yes {
				if err := confirm(cmd, fmt.Sprintf("delete DAG %s and its schedule (its ended runs stay until retention)", dagID)); err != nil {
					return err
				}
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			var resp protocol.DeleteDAGResponse
			if err := c.Do(cmd.Context(), http.MethodDelete, "/v1/dags/"+url.PathEscape(dagID), nil, &resp); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case o.structured():
				return o.printData(out, resp)
			case o.output == outputName:
				fmt.Fprintln(out, resp.DAGID)
			default:
				fmt.Fprintf(out, "dag %s deleted\n", resp.DAGID)
			}
			return nil
		},
	}
	del.Flags().BoolVar(&yes, "yes", false, "delete without asking")
	return del
}

package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/protocol"
)

// newAgentsCmd is `vigil agents list` (docs/design.md §7, Strøm phase 1 registry).
func newAgentsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "Inspect registered agents"}
	o := addClientFlags(cmd)
	groupCmd(cmd)
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List agents: tags, capacity, running count, last heartbeat and state",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.newClient()
			if err != nil {
				return err
			}
			// Every page, newest first: each request is bounded, the list
			// is whole.
			list := protocol.AgentList{Agents: []protocol.Agent{}}
			path := fmt.Sprintf("/v1/agents?limit=%d", protocol.AgentsPageMax)
			for {
				var page protocol.AgentList
				if err := c.Do(cmd.Context(), http.MethodGet, path, nil, &page); err != nil {
					return err
				}
				list.Agents = append(list.Agents, page.Agents...)
				if page.NextCursor == nil {
					break
				}
				path = fmt.Sprintf("/v1/agents?limit=%d&before=%d", protocol.AgentsPageMax, *page.NextCursor)
			}
			return o.render(cmd.OutOrStdout(), view{
				api: list,
				table: func(w io.Writer, wide bool) error {
					tw := newTable(w)
					head := []string{"ID", "NAME", "STATE", "TAGS", "RUNNING", "CAPACITY", "LAST HEARTBEAT", "AGO"}
					if wide {
						head = append(head, "REGISTERED")
					}
					tableRow(tw, head...)
					now := time.Now()
					for _, a := range list.Agents {
						row := []string{fmt.Sprint(a.ID), tableCell(a.Name), a.State, tableCell(strings.Join(a.Tags, ",")),
							fmt.Sprint(a.Running), fmt.Sprint(a.Capacity), fmtTime(a.LastHeartbeatAt),
							fmtDuration(now.Sub(a.LastHeartbeatAt))}
						if wide {
							row = append(row, fmtTime(a.RegisteredAt))
						}
						tableRow(tw, row...)
					}
					return tw.Flush()
				},
				names: namesOf(list.Agents, func(a protocol.Agent) string { return a.Name }),
			})
		},
	})
	return cmd
}

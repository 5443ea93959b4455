package main

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/protocol"
)

// newAgentsCmd is `vigil agents list` (DESIGN §7, Strøm phase 1 registry).
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
			var list protocol.AgentList
			if err := c.Do(cmd.Context(), http.MethodGet, "/v1/agents", nil, &list); err != nil {
				return err
			}
			if o.json() {
				return printJSON(cmd.OutOrStdout(), list.Agents)
			}
			tw := newTable(cmd.OutOrStdout())
			tableRow(tw, "ID", "NAME", "STATE", "TAGS", "RUNNING", "CAPACITY", "LAST HEARTBEAT", "AGO")
			now := time.Now()
			for _, a := range list.Agents {
				tableRow(tw, fmt.Sprint(a.ID), tableCell(a.Name), a.State, tableCell(strings.Join(a.Tags, ",")),
					fmt.Sprint(a.Running), fmt.Sprint(a.Capacity), fmtTime(a.LastHeartbeatAt),
					fmtDuration(now.Sub(a.LastHeartbeatAt)))
			}
			return tw.Flush()
		},
	})
	return cmd
}

package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/protocol"
)

// newAtRiskCmd is `vigil at-risk`: the work a reaper will act on if
// nothing changes, with the time left before it does (GET /v1/at-risk,
// docs/api.md "Work at risk"). It changes nothing, so the viewer token
// may run it.
func newAtRiskCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "at-risk",
		Short: "List work a reaper will act on if nothing changes, with the time left",
		Args:  noArgs,
	}
	o := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := o.newClient()
		if err != nil {
			return err
		}
		var rep protocol.AtRisk
		if err := c.Do(cmd.Context(), http.MethodGet, "/v1/at-risk", nil, &rep); err != nil {
			return err
		}
		return o.render(cmd.OutOrStdout(), view{
			api:   rep,
			table: func(w io.Writer, wide bool) error { return printAtRisk(w, rep, wide) },
			names: func() []string { return atRiskNames(rep) },
		})
	}
	return cmd
}

// atRiskNames is -o name: RUN_ID/TASK_ID per task instance, RUN_ID per run.
func atRiskNames(rep protocol.AtRisk) []string {
	var out []string
	for _, r := range rep.Running {
		out = append(out, fmt.Sprintf("%d/%s", r.RunID, r.TaskID))
	}
	for _, q := range rep.Queued {
		out = append(out, fmt.Sprintf("%d/%s", q.RunID, q.TaskID))
	}
	for _, r := range rep.Runs {
		out = append(out, fmt.Sprint(r.RunID))
	}
	return out
}

// printAtRisk writes one table of every kind of risk, soonest first within
// each kind; wide adds the reaper's outcome in words.
func printAtRisk(w io.Writer, rep protocol.AtRisk, wide bool) error {
	for _, n := range rep.Grace {
		fmt.Fprintf(w, "%s: %s\n", n.Reaper, n.Message)
	}
	if len(rep.Running)+len(rep.Queued)+len(rep.Runs) == 0 {
		fmt.Fprintln(w, "nothing at risk")
		return nil
	}
	tw := newTable(w)
	head := []string{"RISK", "RUN", "TASK", "TRY", "AGENT", "WHY", "TIME_LEFT", "THEN"}
	if wide {
		head = append(head, "OUTCOME")
	}
	tableRow(tw, head...)
	row := func(cells ...string) {
		if !wide {
			cells = cells[:len(cells)-1]
		}
		tableRow(tw, cells...)
	}
	for _, r := range rep.Running {
		row("heartbeat overdue", fmt.Sprint(r.RunID), r.TaskID, tryCell(r.TryNumber), fmtOptInt(r.AgentID),
			"silent "+fmtDuration(r.Silent.D()), fmtDuration(r.TimeLeft.D()), r.Decision, tableCell(r.Outcome))
	}
	for _, q := range rep.Queued {
		why := "missing tags " + strings.Join(q.MissingTags, ",")
		if len(q.MissingTags) == 0 {
			why = "no agent offers all of " + strings.Join(q.RequiredTags, ",")
		}
		row("no agent can take it", fmt.Sprint(q.RunID), q.TaskID, tryCell(q.TryNumber), "-", why,
			fmtDuration(q.TimeLeft.D()), "dispatch_lost", tableCell(q.Outcome))
	}
	for _, r := range rep.Runs {
		row("run timeout near", fmt.Sprint(r.RunID), "-", "-", "-", "timeout "+fmtDuration(r.Timeout.D()),
			fmtDuration(r.TimeLeft.D()), "run_timeout", "dag "+r.DAGID)
	}
	return tw.Flush()
}

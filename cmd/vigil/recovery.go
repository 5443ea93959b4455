package main

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/protocol"
)

// newReapCmd is `vigil reap [--dry-run]`: list every reaper candidate with
// the signal that qualifies it and its age, or force one sweep now
// (horsies manual recovery; docs/design.md §7).
func newReapCmd() *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "reap",
		Short: "Force a reaper sweep now, or list what it would do with --dry-run",
		Args:  noArgs,
	}
	o := addClientFlags(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list candidates without writing anything")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := o.newClient()
		if err != nil {
			return err
		}
		var rep protocol.ReapReport
		method := http.MethodPost
		if dryRun {
			method = http.MethodGet
		}
		if err := c.Do(cmd.Context(), method, "/v1/reap", nil, &rep); err != nil {
			return err
		}
		return o.render(cmd.OutOrStdout(), view{
			api:   rep,
			table: func(w io.Writer, wide bool) error { return printReapReport(cmd, w, rep, wide) },
			names: namesOf(rep.Candidates, candidateName),
		})
	}
	return cmd
}

// candidateName is a reap candidate for -o name: RUN_ID, or RUN_ID/TASK_ID
// for a task instance.
func candidateName(c protocol.ReapCandidate) string {
	if c.TaskID == "" {
		return fmt.Sprint(c.RunID)
	}
	return fmt.Sprintf("%d/%s", c.RunID, c.TaskID)
}

// printReapReport writes the grace notices, the candidates table (wide
// adds when each candidate's signal was seen) and, on stderr, the errors.
func printReapReport(cmd *cobra.Command, out io.Writer, rep protocol.ReapReport, wide bool) error {
	if rep.Forwarded {
		fmt.Fprintf(out, "this replica does not lead: asked the leader (%s) to sweep now\n", orUnknown(rep.Leader))
		return nil
	}
	for _, n := range rep.Grace {
		fmt.Fprintf(out, "%s: %s\n", n.Reaper, n.Message)
	}
	if len(rep.Candidates) == 0 {
		fmt.Fprintln(out, "no candidates")
	} else {
		tw := newTable(out)
		head := []string{"REAPER", "DECISION", "RUN", "TASK", "TRY", "AGENT", "SIGNAL", "AGE"}
		if wide {
			head = append(head, "SIGNAL_AT")
		}
		if !rep.DryRun {
			head = append(head, "APPLIED")
		}
		tableRow(tw, append(head, "MESSAGE")...)
		for _, c := range rep.Candidates {
			row := []string{c.Reaper, c.Decision, fmt.Sprint(c.RunID), tableCell(c.TaskID), tryCell(c.TryNumber),
				fmtOptInt(c.AgentID), c.Signal, fmtDuration(c.Age.D())}
			if wide {
				row = append(row, fmtEventTime(c.SignalAt))
			}
			if !rep.DryRun {
				row = append(row, fmt.Sprint(c.Applied))
			}
			tableRow(tw, append(row, tableCell(c.Message))...)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, e := range rep.Errors {
		fmt.Fprintln(cmd.ErrOrStderr(), "error:", e)
	}
	if len(rep.Errors) > 0 {
		return fmt.Errorf("%d reaper error(s)", len(rep.Errors))
	}
	return nil
}

func tryCell(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// newThresholdsCmd is `vigil thresholds get | set | reset` (docs/design.md §5
// tuning API over HTTP).
func newThresholdsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "thresholds", Short: "Get or set the reaper thresholds (shared by every replica)"}
	o := addClientFlags(cmd)
	groupCmd(cmd)
	show := func(cmd *cobra.Command, th protocol.Thresholds) error {
		return o.render(cmd.OutOrStdout(), view{
			api: th,
			table: func(w io.Writer, wide bool) error {
				tw := newTable(w)
				if wide {
					tableRow(tw, "THRESHOLD", "VALUE", "FIELD")
					tableRow(tw, "agent-lost", th.AgentLost.D().String(), "agent_lost")
					tableRow(tw, "dispatch-lost", th.DispatchLost.D().String(), "dispatch_lost")
					tableRow(tw, "orphan", th.Orphan.D().String(), "orphan")
					return tw.Flush()
				}
				tableRow(tw, "THRESHOLD", "VALUE")
				tableRow(tw, "agent-lost", th.AgentLost.D().String())
				tableRow(tw, "dispatch-lost", th.DispatchLost.D().String())
				tableRow(tw, "orphan", th.Orphan.D().String())
				return tw.Flush()
			},
			names: func() []string { return []string{"agent-lost", "dispatch-lost", "orphan"} },
		})
	}
	get := &cobra.Command{
		Use: "get", Short: "Show the effective thresholds", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.newClient()
			if err != nil {
				return err
			}
			var th protocol.Thresholds
			if err := c.Do(cmd.Context(), http.MethodGet, "/v1/thresholds", nil, &th); err != nil {
				return err
			}
			return show(cmd, th)
		},
	}
	var agentLost, dispatchLost, orphan time.Duration
	set := &cobra.Command{
		Use: "set", Short: "Change thresholds at runtime (validated; every replica follows)", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var upd protocol.ThresholdsUpdate
			for _, f := range []struct {
				name string
				v    time.Duration
				dst  **protocol.Duration
			}{{"agent-lost", agentLost, &upd.AgentLost}, {"dispatch-lost", dispatchLost, &upd.DispatchLost}, {"orphan", orphan, &upd.Orphan}} {
				if cmd.Flags().Changed(f.name) {
					if f.v <= 0 {
						return usageError("--%s: %s must be positive", f.name, f.v)
					}
					d := protocol.Duration(f.v)
					*f.dst = &d
				}
			}
			if upd.AgentLost == nil && upd.DispatchLost == nil && upd.Orphan == nil {
				return usageError("thresholds set: give at least one of --agent-lost, --dispatch-lost, --orphan")
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			var th protocol.Thresholds
			if err := c.Do(cmd.Context(), http.MethodPut, "/v1/thresholds", upd, &th); err != nil {
				return serverRejectedThresholds(err)
			}
			return show(cmd, th)
		},
	}
	set.Flags().DurationVar(&agentLost, "agent-lost", 0, "agent-lost threshold, e.g. 90s (≥ 2 × heartbeat interval)")
	set.Flags().DurationVar(&dispatchLost, "dispatch-lost", 0, "dispatch-lost threshold, e.g. 3m")
	set.Flags().DurationVar(&orphan, "orphan", 0, "orphan-run threshold, e.g. 5m")
	reset := &cobra.Command{
		Use: "reset", Short: "Drop runtime overrides and return to the configured thresholds", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.newClient()
			if err != nil {
				return err
			}
			var th protocol.Thresholds
			if err := c.Do(cmd.Context(), http.MethodDelete, "/v1/thresholds", nil, &th); err != nil {
				return err
			}
			return show(cmd, th)
		},
	}
	cmd.AddCommand(get, set, reset)
	return cmd
}

package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
)

func newDagsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dags",
		Short: "Apply, list and delete DAG specs",
	}
	o := addClientFlags(cmd)
	groupCmd(cmd)
	cmd.AddCommand(newDagsApplyCmd(o), newDagsListCmd(o), newDagsPauseCmd(o, true), newDagsPauseCmd(o, false), newDagsNextCmd(o),
		newDagsBackfillCmd(o), newDagsDeleteCmd(o))
	return cmd
}

func newDagsApplyCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "apply PATH...",
		Short: "Validate DAG spec files (or directories of *.yaml, *.yml) and apply them",
		Long: `Validate every spec locally first; if any file is invalid, report it and
apply nothing. Then send each spec to the server, which reports whether
it was created, updated or unchanged.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError("%s needs at least one PATH (a spec file or a directory)", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			files, err := loadSpecFiles(args)
			if err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			results := make([]protocol.ApplyDAGResponse, 0, len(files))
			for _, f := range files {
				res, err := c.ApplyDAG(cmd.Context(), string(f.Data))
				if err != nil {
					return fmt.Errorf("%s: apply dag %q: %w", f.Path, f.Spec.DAGID, err)
				}
				results = append(results, res)
				switch o.output {
				case outputTable, outputWide:
					fmt.Fprintf(out, "dag %s: %s\n", res.DAGID, res.Result)
				case outputName:
					fmt.Fprintln(out, res.DAGID)
				}
				for _, w := range res.Warnings {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s: %s\n", f.Path, w)
				}
			}
			if o.structured() {
				// One POST /v1/dags reply per file, in order.
				return o.printData(out, results)
			}
			return nil
		},
	}
}

// loadSpecFiles validates every spec under paths with dag.LoadFiles
// before anything is sent: any bad file, or two files with one dag_id,
// fails the lot.
func loadSpecFiles(paths []string) ([]dag.File, error) {
	files, err := dag.LoadFiles(paths...)
	if err != nil {
		return nil, fmt.Errorf("%w\nnothing applied", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no DAG spec files (*.yaml, *.yml) found", strings.Join(paths, ", "))
	}
	return files, nil
}

func newDagsListCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List applied DAGs",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.newClient()
			if err != nil {
				return err
			}
			dags, err := c.ListDAGs(cmd.Context())
			if err != nil {
				return err
			}
			if dags == nil {
				dags = []protocol.DAG{}
			}
			return o.render(cmd.OutOrStdout(), view{
				api: protocol.DAGList{DAGs: dags},
				table: func(w io.Writer, wide bool) error {
					tw := newTable(w)
					head := []string{"DAG_ID", "TASKS", "PAUSED", "UPDATED"}
					if wide {
						head = append(head, "SPEC_BYTES")
					}
					tableRow(tw, head...)
					for _, d := range dags {
						row := []string{d.DAGID, strconv.Itoa(d.Tasks), strconv.FormatBool(d.Paused), fmtTime(d.UpdatedAt)}
						if wide {
							row = append(row, strconv.Itoa(d.SpecBytes))
						}
						tableRow(tw, row...)
					}
					return tw.Flush()
				},
				names: namesOf(dags, func(d protocol.DAG) string { return d.DAGID }),
			})
		},
	}
}

// newDagsPauseCmd is `vigil dags pause` (paused true) or `vigil dags
// unpause`: a paused DAG's schedule creates no runs (docs/schedules.md).
func newDagsPauseCmd(o *clientOpts, paused bool) *cobra.Command {
	use, short := "unpause DAG_ID", "Unpause a DAG: its schedule creates runs again from its next slot"
	if paused {
		use, short = "pause DAG_ID", "Pause a DAG: its schedule creates no runs until it is unpaused"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + `.
Runs already created are untouched. A repeat is a no-op and says so.`,
		Args: exactArgs("DAG_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.newClient()
			if err != nil {
				return err
			}
			res, err := c.SetPaused(cmd.Context(), args[0], paused)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case o.structured():
				return o.printData(out, res)
			case o.output == outputName:
				fmt.Fprintln(out, res.DAGID)
			default:
				now := "unpaused"
				if res.Paused {
					now = "paused"
				}
				if !res.Changed {
					now = "already " + now
				}
				fmt.Fprintf(out, "dag %s %s\n", res.DAGID, now)
			}
			return nil
		},
	}
}

// newDagsNextCmd is `vigil dags next`: the DAG's next schedule slots.
func newDagsNextCmd(o *clientOpts) *cobra.Command {
	var count int
	cmd := &cobra.Command{
		Use:   "next DAG_ID",
		Short: "Show a DAG's next schedule slots: logical date and data interval",
		Long: `Show the next --count slots of DAG_ID's schedule, from its next slot
(docs/schedules.md). A slot's run is due at the end of its data interval.`,
		Args: exactArgs("DAG_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 || count > 1000 {
				return usageError("--count: %d must be in 1..1000", count)
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			next, err := c.NextSlots(cmd.Context(), args[0], count)
			if err != nil {
				return err
			}
			return o.render(cmd.OutOrStdout(), view{
				api: next,
				table: func(w io.Writer, wide bool) error {
					if next.Schedule == "" {
						_, err := fmt.Fprintf(w, "dag %s has no schedule\n", next.DAGID)
						return err
					}
					if next.Paused {
						fmt.Fprintf(w, "dag %s is paused: these slots run once it is unpaused\n", next.DAGID)
					}
					tw := newTable(w)
					tableRow(tw, "LOGICAL_DATE", "DATA_INTERVAL_START", "DATA_INTERVAL_END")
					for _, sl := range next.Slots {
						tableRow(tw, fmtTime(sl.LogicalDate), fmtTime(sl.DataIntervalStart), fmtTime(sl.DataIntervalEnd))
					}
					return tw.Flush()
				},
				names: namesOf(next.Slots, func(sl protocol.ScheduleSlot) string { return sl.LogicalDate.UTC().Format(time.RFC3339) }),
			})
		},
	}
	cmd.Flags().IntVar(&count, "count", 5, "how many slots to show (1..1000)")
	return cmd
}

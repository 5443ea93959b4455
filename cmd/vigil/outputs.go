package main

import (
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/protocol"
)

func newRunsOutputsCmd(o *clientOpts) *cobra.Command {
	var taskID string
	cmd := &cobra.Command{
		Use:   "outputs RUN_ID",
		Short: "Show the outputs a run's tasks wrote to $VIGIL_OUTPUT",
		Long: `Show the outputs of a run's task instances that ended success: what the
try that succeeded wrote to its $VIGIL_OUTPUT file, one line per key, in the
DAG's task order (docs/task-environment.md, "Outputs"). The table shows each
value on one line, line breaks as \n, cut at 120 characters; -o json and
-o yaml show them whole, as GET /v1/runs/{run_id}/outputs does. -o name
prints TASK.KEY.`,
		Args: exactArgs("RUN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseRunID(args[0])
			if err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			list, err := c.RunOutputs(cmd.Context(), id, taskID)
			if err != nil {
				return err
			}
			if list == nil {
				list = []protocol.TIOutputs{}
			}
			return o.render(cmd.OutOrStdout(), view{
				// Every page read: the shape of one page, holding them all.
				api:   protocol.OutputList{RunID: id, Outputs: list},
				table: func(w io.Writer, wide bool) error { return outputsTable(w, list, wide) },
				names: func() []string {
					var names []string
					for _, ti := range list {
						for _, k := range slices.Sorted(maps.Keys(ti.Outputs)) {
							names = append(names, ti.TaskID+"."+k)
						}
					}
					return names
				},
			})
		},
	}
	cmd.Flags().StringVar(&taskID, "task", "", "only this task's outputs")
	return cmd
}

// outputsTable writes one row per output: task, try, key and the value on
// one line; wide adds the TI's id and its outputs' size in bytes.
func outputsTable(w io.Writer, list []protocol.TIOutputs, wide bool) error {
	tw := newTable(w)
	head := []string{"TASK", "TRY", "KEY", "VALUE"}
	if wide {
		head = append([]string{"TI", "BYTES"}, head...)
	}
	tableRow(tw, head...)
	for _, ti := range list {
		for _, k := range slices.Sorted(maps.Keys(ti.Outputs)) {
			row := []string{ti.TaskID, strconv.Itoa(ti.TryNumber), k, outputCell(ti.Outputs[k])}
			if wide {
				row = append([]string{strconv.FormatInt(ti.TIID, 10), strconv.Itoa(ti.Bytes)}, row...)
			}
			tableRow(tw, row...)
		}
	}
	return tw.Flush()
}

// outputCell is an output's value on one table line: line breaks and tabs
// written \n, \r and \t, cut to maxCell characters with "…", and "" shown
// as "".
func outputCell(v string) string {
	if v == "" {
		return `""`
	}
	s := strings.NewReplacer("\r", `\r`, "\n", `\n`, "\t", `\t`).Replace(v)
	if r := []rune(s); len(r) > maxCell {
		s = string(r[:maxCell-1]) + "…"
	}
	return s
}

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/vigil-sched/vigil/api/protocol"
)

// confirm asks the operator on standard input to confirm what, and
// returns nil when they answer yes. When standard input is not a terminal
// there is no one to ask: it refuses, saying to pass --yes.
func confirm(cmd *cobra.Command, what string) error {
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); !ok || !isTTY(f) {
		return usageError("%s: standard input is not a terminal, so there is no one to confirm; pass --yes", cmd.CommandPath())
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s? [y/N] ", what)
	answer, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && err != io.EOF {
		return err
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("%s: not confirmed; nothing changed", cmd.CommandPath())
}

// isTTY reports whether f is a terminal: a character device that answers
// the terminal ioctl (/dev/null is a character device, and no terminal).
func isTTY(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// clearedLines renders what a clear did (or would do), one TI a line.
func clearedLines(w io.Writer, res protocol.ClearResponse) {
	for _, c := range res.Cleared {
		line := fmt.Sprintf("  %s: was %s", c.TaskID, c.State)
		if c.TryNumber > 0 {
			line = fmt.Sprintf("  %s: try %d was %s", c.TaskID, c.TryNumber, c.State)
		}
		if c.Rederived {
			line += " (derived again from its upstreams)"
		}
		fmt.Fprintf(w, "%s; runs as try %d\n", line, c.TryNumber+1)
	}
}

func newRunsClearCmd(o *clientOpts) *cobra.Command {
	var (
		req protocol.ClearRequest
		yes bool
	)
	cmd := &cobra.Command{
		Use:   "clear RUN_ID",
		Short: "Clear task instances of a run so they run again as new tries",
		Long: `Return task instances of RUN_ID to none so that they run again, each as a
new try (try_number keeps counting, and each gets its retries again). By
default every task instance that ended failed, upstream_failed or skipped
is cleared; --task names others. Dependents the scheduler ended by their
trigger rule (upstream_failed, skipped by the rule) that the clear may
decide otherwise are cleared with them and judged again. An ended run
returns to running. A queued or running task instance in the selection
refuses the whole clear (nothing changes). See docs/rerun.md.

Without --yes it lists the selection and asks; with no terminal to ask
on, it refuses. --dry-run only lists it.`,
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
			out := cmd.OutOrStdout()
			if !yes && !req.DryRun {
				plan := req
				plan.DryRun = true
				dry, err := c.ClearRun(cmd.Context(), id, plan)
				if err != nil {
					return err
				}
				if len(dry.Cleared) == 0 {
					fmt.Fprintf(out, "run %d: nothing to clear\n", id)
					return nil
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "run %d: %d task instances to clear:\n", id, len(dry.Cleared))
				clearedLines(cmd.ErrOrStderr(), dry)
				if err := confirm(cmd, "Clear them"); err != nil {
					return err
				}
			}
			res, err := c.ClearRun(cmd.Context(), id, req)
			if err != nil {
				return err
			}
			switch {
			case o.structured():
				return o.printData(out, res)
			case o.output == outputName:
				for _, t := range res.Cleared {
					fmt.Fprintln(out, t.TaskID)
				}
			case len(res.Cleared) == 0:
				fmt.Fprintf(out, "run %d: nothing to clear\n", id)
			default:
				verb := "cleared"
				if res.DryRun {
					verb = "would clear (dry run)"
				}
				fmt.Fprintf(out, "run %d %s: %s %d task instances\n", res.Run.ID, res.Run.State, verb, len(res.Cleared))
				clearedLines(out, res)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&req.TaskIDs, "task", nil, "a task to clear (repeatable); default: every task instance that ended failed, upstream_failed or skipped")
	f.BoolVar(&req.Downstream, "downstream", false, "also clear the selection's transitive dependents")
	f.BoolVar(&req.Upstream, "upstream", false, "also clear the selection's transitive dependencies")
	f.BoolVar(&req.OnlyFailed, "only-failed", false, "keep, of the selection, the task instances that ended failed or upstream_failed")
	f.BoolVar(&req.DryRun, "dry-run", false, "list what would be cleared; change nothing")
	f.StringVar(&req.Reason, "reason", "", fmt.Sprintf("why, recorded in each cleared task instance's event (at most %d bytes)", protocol.MaxReasonLen))
	f.BoolVar(&yes, "yes", false, "clear without asking")
	return cmd
}

func newTasksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Act on one task instance of a run",
	}
	o := addClientFlags(cmd)
	groupCmd(cmd)
	cmd.AddCommand(newTasksMarkCmd(o))
	return cmd
}

func newTasksMarkCmd(o *clientOpts) *cobra.Command {
	var (
		req protocol.MarkRequest
		yes bool
	)
	cmd := &cobra.Command{
		Use:   "mark RUN_ID TASK_ID success|failed",
		Short: "Set a task instance to success or failed by hand",
		Long: `Set TASK_ID of RUN_ID (with --downstream, its transitive dependents too) to
success or failed, with reason marked; its dependents proceed as if it had
ended so, under their trigger rules: marked failed, all_success dependents
become upstream_failed; marked success, they run. An ended run returns to running and is
finalized again, so a mark may change how it ends. A queued or running
task instance is refused. See docs/rerun.md.

Without --yes it asks first; with no terminal to ask on, it refuses.`,
		Args: exactArgs("RUN_ID", "TASK_ID", "STATE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseRunID(args[0])
			if err != nil {
				return err
			}
			taskID := args[1]
			req.State = args[2]
			if req.State != "success" && req.State != "failed" {
				return usageError("STATE: %q must be success or failed", req.State)
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			if !yes {
				what := fmt.Sprintf("Mark task %s of run %d %s", taskID, id, req.State)
				if req.Downstream {
					what += ", with its downstream tasks"
				}
				if err := confirm(cmd, what); err != nil {
					return err
				}
			}
			res, err := c.MarkTI(cmd.Context(), id, taskID, req)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case o.structured():
				return o.printData(out, res)
			case o.output == outputName:
				for _, t := range res.Marked {
					fmt.Fprintln(out, t.TaskID)
				}
			default:
				fmt.Fprintf(out, "run %d %s: marked %d task instances %s\n", res.Run.ID, res.Run.State, len(res.Marked), req.State)
				for _, t := range res.Marked {
					fmt.Fprintf(out, "  %s: was %s\n", t.TaskID, t.State)
				}
				for _, t := range res.Reopened {
					fmt.Fprintf(out, "  %s: derived again from its upstreams\n", t)
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&req.Downstream, "downstream", false, "also mark the task's transitive dependents")
	f.StringVar(&req.Reason, "reason", "", fmt.Sprintf("why, recorded in each marked task instance's event (at most %d bytes)", protocol.MaxReasonLen))
	f.BoolVar(&yes, "yes", false, "mark without asking")
	return cmd
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/client"
	"github.com/vigil-sched/vigil/api/protocol"
)

// logsFollowInterval is how often logs --follow polls for new lines.
const logsFollowInterval = 500 * time.Millisecond

// logsSettle is how long logs --follow keeps polling after it first sees
// the task terminal: an agent may ship its last lines just after it
// reports completion, or while a cancelled process is being stopped.
const logsSettle = 2 * logsFollowInterval

// logsPageLimit is the most lines the server returns per request
// (store.ReadLogs); a full page means more may be waiting.
const logsPageLimit = 10000

func newLogsCmd() *cobra.Command {
	var (
		o      *clientOpts
		try    int
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "logs RUN_ID TASK_ID",
		Short: "Print a task's log lines",
		Long: `Print the log lines of task TASK_ID of run RUN_ID, every try unless --try
is given, as "TIME [STREAM] LINE" (stream stdout, stderr or system). With
--follow, keep printing new lines until the task has ended and every line
has been read. -o json prints one JSON object per line.`,
		Args: exactArgs("RUN_ID", "TASK_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseRunID(args[0])
			if err != nil {
				return err
			}
			if try < 0 {
				return usageError("--try: %d must not be negative (0: every try)", try)
			}
			if o.output == outputYAML || o.output == outputName {
				return usageError("--output: %q does not fit a stream of log lines: use table, wide or json (one object a line)", o.output)
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			return streamLogs(cmd.Context(), c, cmd.OutOrStdout(), id, args[1], try, follow, o.json(), logsFollowInterval, logsSettle)
		},
	}
	o = addClientFlags(cmd)
	cmd.ValidArgsFunction = completeLogsArgs(o)
	cmd.Flags().IntVar(&try, "try", 0, "only this try number (0: every try)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until the task ends")
	return cmd
}

// streamLogs prints the task's lines page by page in (try, seq) order,
// cursoring on the last line's try and seq, so each line is printed
// once, in the order the task printed it. Without follow it stops once a page is not full;
// with follow it polls every interval and stops when a reply says the task
// is terminal and carries no new lines, once the task has been seen
// terminal for settle; or when ctx is cancelled (Ctrl-C).
func streamLogs(ctx context.Context, c *client.Client, w io.Writer, runID int64, taskID string, try int, follow, asJSON bool, interval, settle time.Duration) error {
	var (
		after         client.LogCursor
		terminalSince time.Time
		dropped       int64 // the TI's lost lines, as of the last page
	)
	enc := json.NewEncoder(w)
	for {
		page, err := c.Logs(ctx, runID, taskID, try, after)
		if err != nil {
			if follow && errors.Is(ctx.Err(), context.Canceled) {
				return nil // interrupted: the normal end of --follow
			}
			return err
		}
		for _, l := range page.Lines {
			if asJSON {
				if err := enc.Encode(l); err != nil {
					return err
				}
			} else if _, err := fmt.Fprintln(w, fmtLogLine(l)); err != nil {
				return err
			}
			after = client.LogCursor{Try: l.TryNumber, Seq: l.Seq}
		}
		dropped = page.LogDropped
		switch {
		case page.More || len(page.Lines) >= logsPageLimit:
			continue // more are waiting
		case !follow:
			return warnIncomplete(w, asJSON, dropped)
		case !page.Terminal:
		case terminalSince.IsZero():
			terminalSince = time.Now()
		case len(page.Lines) == 0 && time.Since(terminalSince) >= settle:
			return warnIncomplete(w, asJSON, dropped)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil
			}
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// fmtLogLine is "2026-11-21T10:00:00.123Z [stdout] text"; a gap marker
// that counts lost lines ends with "[N lines of this try lost here]".
func fmtLogLine(l protocol.StoredLogLine) string {
	s := fmtLogTime(l.Time) + " [" + l.Stream + "] " + l.Line
	if l.Dropped > 0 {
		s += fmt.Sprintf(" [%d lines of this try lost here]", l.Dropped)
	}
	return s
}

// warnIncomplete ends a table listing of a log that lost lines with a
// line saying so (JSON output carries log_dropped on the markers).
func warnIncomplete(w io.Writer, asJSON bool, dropped int64) error {
	if dropped == 0 || asJSON {
		return nil
	}
	_, err := fmt.Fprintf(w, "log incomplete: %d line(s) were lost (see the gap markers above)\n", dropped)
	return err
}

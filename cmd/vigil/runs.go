package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/client"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// runStateNames are the run states --state accepts (package state).
var runStateNames = state.Strings(state.RunStates())

// runTerminal reports whether a run state (as the API spells it) is final.
func runTerminal(s string) bool { return state.Run(s).Terminal() }

// waitRetryFor is how long trigger --wait keeps polling through
// consecutive transient errors (transport failures, 5xx) before giving up.
const waitRetryFor = 30 * time.Second

func newRunsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "Trigger, list, inspect, cancel and clear DAG runs",
	}
	o := addClientFlags(cmd)
	groupCmd(cmd)
	cmd.AddCommand(
		newRunsTriggerCmd(o),
		newRunsListCmd(o),
		newRunsShowCmd(o),
		newRunsEventsCmd(o),
		newRunsOutputsCmd(o),
		newRunsCancelCmd(o),
		newRunsClearCmd(o),
	)
	wireRunsCompletion(cmd, o)
	return cmd
}

func newRunsTriggerCmd(o *clientOpts) *cobra.Command {
	var (
		wait          bool
		poll, timeout time.Duration
		confPairs     []string
		confPath      string
	)
	cmd := &cobra.Command{
		Use:   "trigger DAG_ID",
		Short: "Queue a run of a DAG, optionally waiting for it to finish",
		Long: `Queue a run of DAG_ID. With --wait, poll the run and print each task's
state changes until the run ends; exit 0 when it ends in success and 3
when it ends failed or cancelled.

--conf key=value (repeatable) or --conf-file F (a JSON or YAML mapping)
sets the run's parameters; tasks see each as VIGIL_PARAM_<KEY>. The
server checks them against the DAG's params (docs/params.md); a rejected
key exits 2 with the server's message.`,
		Args: exactArgs("DAG_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if poll <= 0 {
				return usageError("--poll: %s must be positive", poll)
			}
			if timeout < 0 {
				return usageError("--timeout: %s must not be negative", timeout)
			}
			conf, err := runConf(confPairs, confPath)
			if err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			run, err := c.TriggerRunConf(cmd.Context(), args[0], conf)
			if err != nil {
				return rejected("conf", err)
			}
			if !wait {
				switch {
				case o.structured():
					return o.printData(out, run)
				case o.output == outputName:
					fmt.Fprintln(out, run.ID)
				default:
					fmt.Fprintf(out, "run %d of %s %s\n", run.ID, run.DAGID, run.State)
				}
				return nil
			}
			var progress io.Writer = out
			if o.structured() || o.output == outputName {
				progress = io.Discard
			} else {
				fmt.Fprintf(out, "run %d of %s %s\n", run.ID, run.DAGID, run.State)
			}
			detail, err := waitRun(cmd.Context(), c, run.ID, poll, timeout, progress, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			switch {
			case o.structured():
				if err := o.printData(out, detail); err != nil {
					return err
				}
			case o.output == outputName:
				fmt.Fprintln(out, detail.ID)
			default:
				fmt.Fprintln(out, runSummary(detail.Run))
			}
			if state.Run(detail.State) != state.RunSuccess {
				return &exitCodeError{code: exitRunFailed, err: fmt.Errorf("run %d ended %s", detail.ID, detail.State)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&wait, "wait", false, "wait for the run to end; exit 3 unless it ends in success")
	f.DurationVar(&poll, "poll", time.Second, "with --wait: how often to poll the run")
	f.DurationVar(&timeout, "timeout", 0, "with --wait: give up waiting after this long (0: never); the run goes on")
	f.StringArrayVar(&confPairs, "conf", nil, "a run parameter as key=value (repeatable); tasks see VIGIL_PARAM_<KEY>")
	f.StringVar(&confPath, "conf-file", "", "run parameters from a JSON or YAML file of key: value (exclusive with --conf)")
	return cmd
}

// waitRun polls run id until it is terminal, writing a line to progress
// whenever a task's state changes. Transient errors are retried for up to
// waitRetryFor; a --timeout expiry is an error (exit 1).
func waitRun(ctx context.Context, c *client.Client, id int64, poll, timeout time.Duration, progress, stderr io.Writer) (protocol.RunDetail, error) {
	waitCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	shown := make(map[string]string) // task_id -> last state printed
	var (
		last        protocol.RunDetail
		failingFrom time.Time
	)
	for {
		d, err := c.GetRun(waitCtx, id)
		switch {
		case err == nil:
			failingFrom = time.Time{}
			last = d
			for _, ti := range d.TaskInstances {
				if state.TI(ti.State) == state.TINone || shown[ti.TaskID] == ti.State {
					continue
				}
				shown[ti.TaskID] = ti.State
				fmt.Fprintln(progress, "  "+tiProgress(ti))
			}
			if runTerminal(d.State) {
				return d, nil
			}
		case waitCtx.Err() != nil:
			// Handled below.
		case retryablePollError(err):
			if failingFrom.IsZero() {
				failingFrom = time.Now()
				fmt.Fprintf(stderr, "vigil: polling run %d: %v (retrying)\n", id, err)
			} else if time.Since(failingFrom) > waitRetryFor {
				return last, fmt.Errorf("run %d: giving up after %s of errors: %w", id, waitRetryFor, err)
			}
		default:
			return last, err
		}
		select {
		case <-waitCtx.Done():
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			still := last.State
			if still == "" {
				still = string(state.RunQueued)
			}
			return last, fmt.Errorf("run %d still %s after --timeout %s; it goes on (see vigil runs show %d)", id, still, timeout, id)
		case <-time.After(poll):
		}
	}
}

// retryablePollError reports whether a poll error is worth retrying: a transport
// failure, or the server being overloaded or unavailable.
func retryablePollError(err error) bool {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests
	}
	return true
}

// tiProgress is one progress line: "extract up_for_retry (try 1/3):
// exit_code: exited with status 1"; reason and message are left out on
// success.
func tiProgress(ti protocol.TaskInstance) string {
	s := ti.TaskID + " " + ti.State
	if ti.MaxTries > 1 && ti.TryNumber > 0 {
		s += fmt.Sprintf(" (try %d/%d)", ti.TryNumber, ti.MaxTries)
	}
	if state.TI(ti.State) == state.TISuccess {
		return s
	}
	return s + explain(ti.State, ti.Reason, ti.Message)
}

// explain is ": reason: message" for a progress line, saying each thing
// once: a reason equal to the state ("upstream_failed upstream_failed")
// is left out, and so is a message's leading restatement of the state
// ("upstream failed: boom failed" after upstream_failed is "boom failed").
func explain(st, reason, message string) string {
	var s string
	if reason != "" && reason != st {
		s += ": " + reason
	}
	for _, said := range []string{st, reason} {
		if said == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(message, strings.ReplaceAll(said, "_", " ")+": "); ok {
			message = rest
		}
	}
	if message != "" {
		s += ": " + message
	}
	return s
}

// runSummary is the final line of trigger --wait: "run 12 success", or
// "run 12 failed (run_timeout): ..." with the reason and message.
func runSummary(r protocol.Run) string {
	s := fmt.Sprintf("run %d %s", r.ID, r.State)
	if state.Run(r.State) == state.RunSuccess {
		return s
	}
	if r.Reason != "" && r.Reason != r.State {
		s += " (" + r.Reason + ")"
	}
	if r.Message != "" {
		s += ": " + r.Message
	}
	return s
}

func newRunsListCmd(o *clientOpts) *cobra.Command {
	var (
		runState, dagID string
		limit           int
		w               watchOpts
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runState != "" && !slices.Contains(runStateNames, runState) {
				return usageError("--state: %q must be one of %s", runState, strings.Join(runStateNames, ", "))
			}
			if limit < 1 || limit > 10000 {
				return usageError("--limit: %d must be in 1..10000", limit)
			}
			if err := w.validate(); err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			show := func(ctx context.Context, out io.Writer) ([]byte, error) {
				runs, err := c.ListRuns(ctx, runState, dagID, limit)
				if err != nil {
					return nil, err
				}
				if runs == nil {
					runs = []protocol.Run{}
				}
				list := protocol.RunList{Runs: runs}
				return jsonBytes(list), o.render(out, runListView(list))
			}
			if !w.on {
				_, err := show(cmd.Context(), cmd.OutOrStdout())
				return err
			}
			return watch(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), w.every, func(ctx context.Context) (frame, error) {
				var buf bytes.Buffer
				data, err := show(ctx, &buf)
				return frame{text: buf.Bytes(), data: data}, err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&runState, "state", "", "only runs in this state: queued, running, success, failed or cancelled")
	f.StringVar(&dagID, "dag", "", "only runs of this DAG")
	f.IntVar(&limit, "limit", 100, "at most this many runs (1..10000)")
	addWatchFlags(cmd, &w)
	return cmd
}

// runListView is how runs list shows list in every -o format.
func runListView(list protocol.RunList) view {
	return view{
		api: list,
		table: func(w io.Writer, wide bool) error {
			now := time.Now()
			tw := newTable(w)
			head := []string{"RUN_ID", "DAG", "STATE", "STARTED", "DURATION", "TASKS"}
			if wide {
				head = append(head, "QUEUED", "ENDED", "TYPE", "LOGICAL_DATE", "REASON", "MESSAGE")
			}
			tableRow(tw, head...)
			for _, r := range list.Runs {
				row := []string{strconv.FormatInt(r.ID, 10), r.DAGID, r.State, fmtTimePtr(r.StartDate),
					elapsed(r.StartDate, r.EndDate, now), fmtCounts(r.TaskCounts)}
				if wide {
					row = append(row, fmtTime(r.QueuedAt), fmtTimePtr(r.EndDate), tableCell(r.RunType),
						fmtTimePtr(r.LogicalDate), tableCell(r.Reason), tableCell(r.Message))
				}
				tableRow(tw, row...)
			}
			return tw.Flush()
		},
		names: namesOf(list.Runs, func(r protocol.Run) string { return strconv.FormatInt(r.ID, 10) }),
	}
}

func newRunsShowCmd(o *clientOpts) *cobra.Command {
	var w watchOpts
	cmd := &cobra.Command{
		Use:   "show RUN_ID",
		Short: "Show a run and its task instances",
		Long: `Show a run and its task instances. With --watch, poll and redraw whenever a
state changes, until the run ends (or Ctrl-C).`,
		Args: exactArgs("RUN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseRunID(args[0])
			if err != nil {
				return err
			}
			if err := w.validate(); err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			show := func(ctx context.Context, out io.Writer) (protocol.RunDetail, error) {
				d, err := c.GetRun(ctx, id)
				if err != nil {
					return d, err
				}
				return d, o.render(out, view{
					api:   d,
					table: func(w io.Writer, wide bool) error { return printRunDetail(w, d, time.Now(), wide) },
					names: func() []string { return []string{strconv.FormatInt(d.ID, 10)} },
				})
			}
			if !w.on {
				_, err := show(cmd.Context(), cmd.OutOrStdout())
				return err
			}
			return watch(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), w.every, func(ctx context.Context) (frame, error) {
				var buf bytes.Buffer
				d, err := show(ctx, &buf)
				return frame{text: buf.Bytes(), data: jsonBytes(d), done: err == nil && runTerminal(d.State)}, err
			})
		},
	}
	addWatchFlags(cmd, &w)
	return cmd
}

// printRunDetail writes the run header, then its task instance table;
// wide adds each TI's claim, start and end times.
func printRunDetail(w io.Writer, d protocol.RunDetail, now time.Time, wide bool) error {
	tw := newTable(w)
	tableRow(tw, "Run:", strconv.FormatInt(d.ID, 10))
	tableRow(tw, "DAG:", d.DAGID)
	tableRow(tw, "State:", d.State)
	printRunOrigin(tw, d.Run)
	if d.Reason != "" {
		tableRow(tw, "Reason:", d.Reason)
	}
	if d.Message != "" {
		tableRow(tw, "Message:", tableCell(d.Message))
	}
	tableRow(tw, "Queued:", fmtTime(d.QueuedAt))
	tableRow(tw, "Started:", fmtTimePtr(d.StartDate))
	tableRow(tw, "Ended:", fmtTimePtr(d.EndDate))
	tableRow(tw, "Duration:", elapsed(d.StartDate, d.EndDate, now))
	tableRow(tw, "Tasks:", fmtCounts(d.TaskCounts))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	head := []string{"TASK", "STATE", "TRY/MAX", "AGENT", "DURATION", "REASON", "MESSAGE"}
	if wide {
		head = append(head[:5], append([]string{"CLAIMED", "STARTED", "ENDED"}, head[5:]...)...)
	}
	tableRow(tw, head...)
	for _, ti := range d.TaskInstances {
		start := ti.StartedAt
		if start == nil {
			start = ti.ClaimedAt
		}
		row := []string{ti.TaskID, ti.State, fmt.Sprintf("%d/%d", ti.TryNumber, ti.MaxTries), fmtOptInt(ti.AgentID),
			elapsed(start, ti.EndDate, now)}
		if wide {
			row = append(row, fmtEventTimePtr(ti.ClaimedAt), fmtEventTimePtr(ti.StartedAt), fmtEventTimePtr(ti.EndDate))
		}
		tableRow(tw, append(row, tableCell(ti.Reason), tableCell(ti.Message+lateNote(ti.Late)+logNote(ti.LogDropped)))...)
	}
	return tw.Flush()
}

// lateNote is the MESSAGE cell's suffix for a TI with a late outcome: a
// success that arrived after a reaper had given up on its attempt.
func lateNote(l *protocol.LateOutcome) string {
	switch {
	case l == nil:
		return ""
	case l.Accepted:
		return fmt.Sprintf(" [late %s of try %d accepted at %s]", l.Outcome, l.TryNumber, fmtTime(l.Time))
	default:
		return fmt.Sprintf(" [late %s of try %d recorded at %s, after the run ended]", l.Outcome, l.TryNumber, fmtTime(l.Time))
	}
}

// logNote is the MESSAGE cell's suffix for a TI whose log lost lines
// (its gap markers counted dropped lines; vigil logs shows where).
func logNote(dropped int64) string {
	if dropped == 0 {
		return ""
	}
	return fmt.Sprintf(" [log incomplete: %d lines lost]", dropped)
}

func newRunsEventsCmd(o *clientOpts) *cobra.Command {
	var (
		after int64
		limit int
	)
	cmd := &cobra.Command{
		Use:   "events RUN_ID",
		Short: "Show a run's timeline of events",
		Long: fmt.Sprintf(`Show a run's timeline of events, oldest first. The server returns it a page
at a time; this reads every page (--limit events per request, 1..%d)
from the event after --after (0: the start) to the end.`, protocol.EventsPageMax),
		Args: exactArgs("RUN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseRunID(args[0])
			if err != nil {
				return err
			}
			if limit < 1 || limit > protocol.EventsPageMax {
				return usageError("--limit: %d must be in 1..%d", limit, protocol.EventsPageMax)
			}
			if after < 0 {
				return usageError("--after: %d must not be negative", after)
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			events, err := c.RunEvents(cmd.Context(), id, after, limit)
			if err != nil {
				return err
			}
			if events == nil {
				events = []protocol.Event{}
			}
			return o.render(cmd.OutOrStdout(), view{
				// Every page read: the shape of the last page, holding them all.
				api: protocol.EventList{Events: events},
				table: func(w io.Writer, wide bool) error {
					tw := newTable(w)
					head := []string{"TIME", "KIND", "TASK", "TRY", "AGENT", "MESSAGE"}
					if wide {
						head = append([]string{"ID"}, head...)
					}
					tableRow(tw, head...)
					for _, e := range events {
						row := []string{fmtEventTime(e.Time), e.Kind, tableCell(e.TaskID), fmtOptInt(e.TryNumber), fmtOptInt(e.AgentID), tableCell(e.Message)}
						if wide {
							row = append([]string{strconv.FormatInt(e.ID, 10)}, row...)
						}
						tableRow(tw, row...)
					}
					return tw.Flush()
				},
				names: namesOf(events, func(e protocol.Event) string { return strconv.FormatInt(e.ID, 10) }),
			})
		},
	}
	f := cmd.Flags()
	f.Int64Var(&after, "after", 0, "start after the event with this id (0: from the first event)")
	f.IntVar(&limit, "limit", protocol.EventsPageDefault, fmt.Sprintf("events per request, 1..%d; every page is read", protocol.EventsPageMax))
	return cmd
}

func newRunsCancelCmd(o *clientOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN_ID",
		Short: "Cancel a queued or running run",
		Args:  exactArgs("RUN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseRunID(args[0])
			if err != nil {
				return err
			}
			c, err := o.newClient()
			if err != nil {
				return err
			}
			run, err := c.CancelRun(cmd.Context(), id)
			if err != nil {
				return err
			}
			switch {
			case o.structured():
				return o.printData(cmd.OutOrStdout(), run)
			case o.output == outputName:
				fmt.Fprintln(cmd.OutOrStdout(), run.ID)
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "run %d %s\n", run.ID, run.State)
			}
			return nil
		},
	}
}

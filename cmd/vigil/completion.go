package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/api/client"
)

// completionTimeout bounds the server lookups of one completion: a shell
// must not hang on a server that is down.
const completionTimeout = 3 * time.Second

// lister names what an argument or flag can be, read from the server.
// Each entry is a value, optionally followed by a tab and a description.
type lister func(ctx context.Context, c *client.Client, args []string) ([]string, error)

// serverCompletion completes from the server of o: the flags, VIGIL_*
// variables and --config are read as for a command; any error completes
// nothing (and never falls back to file names).
func serverCompletion(o *clientOpts, list lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		_ = bindConfig(cmd) // not run for __complete otherwise
		c, err := o.newClient()
		if err != nil {
			cobra.CompDebugln(err.Error(), true)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		parent := cmd.Context()
		if parent == nil {
			parent = context.Background()
		}
		ctx, cancel := context.WithTimeout(parent, completionTimeout)
		defer cancel()
		all, err := list(ctx, c, args)
		if err != nil {
			cobra.CompDebugln(err.Error(), true)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, e := range all {
			if strings.HasPrefix(e, toComplete) {
				out = append(out, e)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// nthArg completes argument n (0-based) with list, and nothing else.
func nthArg(n int, o *clientOpts, list lister) cobra.CompletionFunc {
	complete := serverCompletion(o, list)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) != n {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return complete(cmd, args, toComplete)
	}
}

// listDAGIDs lists the applied DAG ids.
func listDAGIDs(ctx context.Context, c *client.Client, _ []string) ([]string, error) {
	dags, err := c.ListDAGs(ctx)
	out := make([]string, len(dags))
	for i, d := range dags {
		out[i] = d.DAGID + "\t" + strconv.Itoa(d.Tasks) + " tasks"
	}
	return out, err
}

// listRunIDs lists the newest runs' ids, described by DAG and state.
func listRunIDs(ctx context.Context, c *client.Client, _ []string) ([]string, error) {
	runs, err := c.ListRuns(ctx, "", "", 200)
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = strconv.FormatInt(r.ID, 10) + "\t" + r.DAGID + " " + r.State
	}
	return out, err
}

// listTaskIDs lists the task ids of the run in args[0].
func listTaskIDs(ctx context.Context, c *client.Client, args []string) ([]string, error) {
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		return nil, err
	}
	d, err := c.GetRun(ctx, id)
	out := make([]string, len(d.TaskInstances))
	for i, ti := range d.TaskInstances {
		out[i] = ti.TaskID + "\t" + ti.State
	}
	return out, err
}

// completeStates completes --state with the run states.
func completeStates(_ *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return runStateNames, cobra.ShellCompDirectiveNoFileComp
}

// wireRunsCompletion sets the completions of the runs subcommands: DAG
// ids for trigger and --dag, run ids for show, events and cancel, states
// for --state.
func wireRunsCompletion(runs *cobra.Command, o *clientOpts) {
	for _, sub := range runs.Commands() {
		switch sub.Name() {
		case "trigger":
			sub.ValidArgsFunction = nthArg(0, o, listDAGIDs)
		case "show", "events", "cancel", "clear":
			sub.ValidArgsFunction = nthArg(0, o, listRunIDs)
		case "list":
			_ = sub.RegisterFlagCompletionFunc("state", completeStates)
			_ = sub.RegisterFlagCompletionFunc("dag", serverCompletion(o, listDAGIDs))
		}
	}
}

// completeLogsArgs completes RUN_ID, then TASK_ID of that run.
func completeLogsArgs(o *clientOpts) cobra.CompletionFunc {
	runs, tasks := nthArg(0, o, listRunIDs), nthArg(1, o, listTaskIDs)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return runs(cmd, args, toComplete)
		}
		return tasks(cmd, args, toComplete)
	}
}

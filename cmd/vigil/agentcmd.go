package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigil-sched/vigil/agent"
	"github.com/vigil-sched/vigil/agent/supervisor"
	"github.com/vigil-sched/vigil/store"
)

func newAgentCmd() *cobra.Command {
	var (
		servers   []string
		token     string
		tags      []string
		capacity  int
		name      string
		drain     time.Duration
		claimWait time.Duration
		window    time.Duration
		ephemeral bool
		eventBuf  int
		logBuf    int
		envAllow  []string
		killGrace time.Duration
		superv    string
		users     taskUserOpts
	)
	var tokenFile *secretFile
	var tlsOpts clientTLSOpts
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run an agent that claims task instances and runs them as subprocesses",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(servers) == 0 {
				return usageError("--server: at least one control-plane URL is required")
			}
			if err := tokenFile.resolve(); err != nil {
				return err
			}
			if token == "" {
				return usageError("--token or --token-file: the agent token is required")
			}
			httpClient, err := tlsOpts.httpClient(0)
			if err != nil {
				return err
			}
			claimWindow, err := claimWindowConfig("--claim-window", window)
			if err != nil {
				return err
			}
			if err := users.check(); err != nil {
				return err
			}
			log, err := newLogger(cmd, os.Stderr)
			if err != nil {
				return err
			}
			a, err := agent.New(agent.Config{
				Servers: servers, Token: token, Name: name, Tags: tags, Capacity: capacity,
				DrainTimeout: drain, ClaimWait: claimWait, ClaimWindow: claimWindow, Logger: log, HTTPClient: httpClient,
				EventBufferSize: eventBuf, LogBufferSize: logBuf, TaskEnvAllow: envAllow,
				KillGrace: killGrace, SupervisorPath: superv, TaskUser: users.user, TaskUsersAllowed: users.allowed,
			})
			if err != nil {
				return usageError("%v", err)
			}
			return a.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&servers, "server", nil, "control-plane URL(s), comma-separated; the agent fails over between them")
	f.StringVar(&token, "token", "", "agent bearer token (prefer --token-file)")
	tokenFile = addSecretFile(f, "token", &token)
	addClientTLSFlags(f, &tlsOpts)
	f.StringSliceVar(&tags, "tags", nil, "tags this agent offers, comma-separated")
	f.IntVar(&capacity, "capacity", 4, "concurrent task instances")
	f.StringVar(&name, "name", "", "agent name (default hostname-pid)")
	f.DurationVar(&drain, "drain-timeout", 5*time.Minute, "on SIGTERM, how long running tasks may finish before they are killed")
	f.DurationVar(&claimWait, "claim-wait", 30*time.Second, "claim long-poll wait (max 30s)")
	addClaimWindowFlag(f, "claim-window", &window)
	f.BoolVar(&ephemeral, "ephemeral", false, "no effect: every agent deregisters when it stops")
	_ = f.MarkDeprecated("ephemeral", "every agent now deregisters when it stops (SIGTERM or SIGINT)")
	f.IntVar(&eventBuf, "event-buffer-size", 5000, "events buffered while the control plane is unreachable (oldest dropped first)")
	f.IntVar(&logBuf, "log-buffer-size", 10000, "log lines buffered for shipping: when full, a connected agent holds the task's output back; a disconnected one drops the oldest, counted in a gap marker")
	f.DurationVar(&killGrace, "kill-grace", agent.DefaultKillGrace,
		"SIGTERM to SIGKILL delay when a task's process group is killed, also when the agent itself dies")
	f.StringVar(&superv, "supervisor", "",
		"task supervisor program, started once as PROGRAM --parent-pid PID --kill-grace D (default: "+supervisor.ProgramName+
			" beside this binary, else this binary's own "+supervisor.Subcommand+")")
	f.StringSliceVar(&envAllow, "task-env-allow", agent.DefaultTaskEnvAllowList(),
		"variables of the agent's environment that tasks inherit, comma-separated; NAME* is a prefix; VIGIL_* is refused (docs/task-environment.md)")
	addTaskUserFlags(f, "", &users)
	return cmd
}

// taskUserOpts are the flags that run tasks as other OS users
// (agent.Config.TaskUser, TaskUsersAllowed).
type taskUserOpts struct {
	prefix  string // "" for vigil agent, "agent-" for vigil lite
	user    string
	allowed []string
}

// addTaskUserFlags adds --<prefix>task-user and --<prefix>task-users-allowed.
func addTaskUserFlags(f *pflag.FlagSet, prefix string, o *taskUserOpts) {
	o.prefix = prefix
	f.StringVar(&o.user, prefix+"task-user", "",
		"OS user every task runs as (needs root; docs/task-environment.md); empty: the agent's own user")
	f.StringSliceVar(&o.allowed, prefix+"task-users-allowed", nil,
		"OS users a task's run_as_user may name, comma-separated (needs root); empty: none")
}

// geteuid is os.Geteuid; the test of the refusal without root replaces it.
var geteuid = os.Geteuid

// check refuses the flags without root, once and naming them: the
// supervisor switches users with setuid, which only root may call.
func (o *taskUserOpts) check() error {
	if euid := geteuid(); (o.user != "" || len(o.allowed) > 0) && euid != 0 {
		name := "--" + o.prefix + "task-user"
		if o.user == "" {
			name = "--" + o.prefix + "task-users-allowed"
		}
		return usageError("%s: running tasks as another OS user needs root (the task supervisor switches user with setuid), "+
			"and vigil runs as uid %d: run it as root, or leave %s out", name, euid, name)
	}
	return nil
}

// addClaimWindowFlag adds the agent's claim window flag (agent.Config.ClaimWindow)
// under name: `vigil agent --claim-window`, `vigil lite --agent-claim-window`.
func addClaimWindowFlag(f *pflag.FlagSet, name string, d *time.Duration) {
	f.DurationVar(d, name, agent.DefaultClaimWindow,
		fmt.Sprintf("how long a freed slot waits for the agent's other tasks to free more before it claims, unless half the slots are free (0 = claim at once, at most %s)", agent.MaxClaimWindow))
}

// claimWindowConfig turns a claim window flag's value into
// agent.Config.ClaimWindow, where 0 means the default: the flag's 0 is
// agent.ClaimWindowOff. A negative value is a usage error naming flag.
func claimWindowConfig(flag string, d time.Duration) (time.Duration, error) {
	switch {
	case d < 0:
		return 0, usageError("%s: %s must not be negative (0 claims as soon as one slot is free)", flag, d)
	case d > agent.MaxClaimWindow:
		return 0, usageError("%s: %s must be at most %s (it delays a freed slot's next task by up to its length)", flag, d, agent.MaxClaimWindow)
	case d == 0:
		return agent.ClaimWindowOff, nil
	}
	return d, nil
}

func newMigrateCmd() *cobra.Command {
	var url string
	cmd := &cobra.Command{Use: "migrate", Short: "Apply or inspect database migrations"}
	cmd.PersistentFlags().StringVar(&url, "database-url", "", "PostgreSQL URL (required)")
	need := func() error {
		if url == "" {
			return usageError("--database-url: required")
		}
		return nil
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := need(); err != nil {
				return err
			}
			if err := store.Migrate(cmd.Context(), url); err != nil {
				return err
			}
			st, err := store.Status(cmd.Context(), url)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schema at version %d\n", st.Current)
			return nil
		},
	})
	var output string
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the applied and pending migrations",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := need(); err != nil {
				return err
			}
			if err := validOutput(output); err != nil {
				return err
			}
			st, err := store.Status(cmd.Context(), url)
			if err != nil {
				return err
			}
			if st.Pending == nil {
				st.Pending = []string{}
			}
			return renderOutput(output, cmd.OutOrStdout(), view{
				api: st,
				table: func(w io.Writer, _ bool) error {
					_, err := fmt.Fprintf(w, "current version: %d\nlatest version:  %d\npending:         %d %v\n",
						st.Current, st.Latest, len(st.Pending), st.Pending)
					return err
				},
				names: func() []string { return st.Pending }, // the pending migrations
			})
		},
	}
	status.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json, yaml, wide or name (name: the pending migrations)")
	cmd.AddCommand(status)
	return cmd
}

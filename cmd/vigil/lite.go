package main

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigil-sched/vigil/agenttoken"
	"github.com/vigil-sched/vigil/controlplane"
	"github.com/vigil-sched/vigil/identity"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/scheduler"
	"github.com/vigil-sched/vigil/store"
)

// liteOpts are the flags of `vigil lite` (docs/design.md §1, §9).
type liteOpts struct {
	databaseURL   string
	dataDir       string
	dags          string
	agents        int
	agentCapacity int
	agentTags     []string
	windowFlag    time.Duration // --agent-claim-window
	claimWindow   time.Duration // agent.Config.ClaimWindow of windowFlag, set by validate
	drainTimeout  time.Duration
	databaseWait  time.Duration // --database-wait, only with --database-url (dbwait.go)
	taskUsers     taskUserOpts  // --task-user, --task-users-allowed (agentcmd.go)
	planeOpts
}

// planeOpts are the control-plane flags `vigil lite` and `vigil server`
// share: listen address, tokens, intervals, recovery and retention.
type planeOpts struct {
	listen                          string
	agentToken, operatorToken       string
	viewerToken                     string // optional: the read-only role
	agentTokensFile                 string // optional: scoped agent tokens (package agenttoken)
	usersFile                       string // optional: named identities with roles (package identity)
	tickInterval, heartbeatInterval time.Duration
	recovery                        *recoveryOpts
	leaderTimeouts                  store.LeaderTimeouts // zero fields: derived from the TTL
	secretFiles                     []*secretFile        // --agent-token-file, --operator-token-file (secrets.go)
	tls                             serveTLSOpts         // --tls-cert-file, --tls-key-file, --tls-client-ca-file (tls.go)
	conns                           connOpts             // --db-max-conns, --db-heartbeat-conns, --db-agent-conns (conns.go)
	secretsKeyFile                  string               // --secrets-key-file: the key sealing named secrets (secretscmd.go)
	notify                          notifyOpts           // --external-url, --notify-max-age, --notify-retry-delay (webhooks.go)
}

// addPlaneFlags adds the shared control-plane flags to cmd; tokenHelp
// completes the token flags' help.
func addPlaneFlags(cmd *cobra.Command, p *planeOpts, tokenHelp string) {
	f := cmd.Flags()
	f.StringVar(&p.listen, "listen", "127.0.0.1:8080", "HTTP listen address for the API, metrics and health")
	f.StringVar(&p.agentToken, "agent-token", "", "bearer token for agents"+tokenHelp)
	f.StringVar(&p.operatorToken, "operator-token", "", "bearer token for operators"+tokenHelp)
	f.StringVar(&p.viewerToken, "viewer-token", "", "optional bearer token of the read-only viewer role (API and console); must differ from the others")
	f.StringVar(&p.agentTokensFile, "agent-tokens-file", "",
		"YAML list of agent tokens limited to tags ({name, token_sha256, tags}); reread on SIGHUP and on change. --agent-token stays the token for all tags")
	f.StringVar(&p.usersFile, "users-file", "",
		"YAML list of named identities ({name, role, token_sha256}; role viewer, operator or admin); reread on SIGHUP and on change. --operator-token stays the identity operator (admin)")
	p.secretFiles = append(p.secretFiles, addTokenFile(f, "agent-token", &p.agentToken), addTokenFile(f, "operator-token", &p.operatorToken),
		addTokenFile(f, "viewer-token", &p.viewerToken))
	addServeTLSFlags(f, &p.tls)
	f.StringVar(&p.secretsKeyFile, "secrets-key-file", "", "file holding the key that seals named secrets: 32 random bytes, raw or 64 hex characters (openssl rand -hex 32), mode 0600; "+
		"Lite default <data-dir>/secrets.key, generated when absent; vigil server without it serves no secrets")
	f.DurationVar(&p.tickInterval, "tick-interval", scheduler.DefaultInterval, "scheduler tick interval (10ms..1m)")
	f.DurationVar(&p.heartbeatInterval, "heartbeat-interval", scheduler.DefaultHeartbeatInterval, "agent heartbeat interval told to agents (1s..2m)")
	p.recovery = addRecoveryFlags(cmd)
	addNotifyFlags(f, &p.notify)
	addLeaderTimeoutFlags(cmd, &p.leaderTimeouts)
	addConnFlags(cmd, &p.conns)
}

// addLeaderTimeoutFlags adds the flags bounding the leader's PostgreSQL
// sessions (adr/0010-bounded-leader-waits.md), the `leader:` section of the
// config file. 0, the default, derives the value from the election TTL
// (Lite: 10s) with store.DefaultLeaderTimeouts.
func addLeaderTimeoutFlags(cmd *cobra.Command, t *store.LeaderTimeouts) {
	f := cmd.Flags()
	f.DurationVar(&t.Lock, "leader-lock-timeout", 0,
		"lock_timeout of leader transactions and of a new leader taking the fence; 0: TTL/4 within 500ms..5s (< election TTL)")
	f.DurationVar(&t.Statement, "leader-statement-timeout", 0,
		"statement_timeout of leader statements; 0: 30s (> leader-lock-timeout, ≤ 1h)")
	f.DurationVar(&t.IdleInTransaction, "leader-idle-timeout", 0,
		"idle_in_transaction_session_timeout of leader sessions: a leader frozen inside a transaction loses it after this long; 0: TTL/2, ≥ 1s (< election TTL)")
	for _, name := range []string{"leader-lock-timeout", "leader-statement-timeout", "leader-idle-timeout"} {
		_ = f.SetAnnotation(name, configSection, []string{"leader"})
	}
}

// validateLeaderTimeouts resolves the leader timeouts against the
// election TTL (0: Lite, store.DefaultElectionTTL); errors name the flag
// and the rule.
func (p *planeOpts) validateLeaderTimeouts(ttl time.Duration) error {
	if _, err := p.leaderTimeouts.Resolve(ttl); err != nil {
		return usageError("%v", err)
	}
	return nil
}

// validate checks the shared flags; errors name the flag (exit 2).
func (p *planeOpts) validate() error {
	if _, err := p.tls.config(); err != nil {
		return err
	}
	if p.agentTokensFile != "" {
		// Read once here so that a bad file fails before the database
		// is reached; the control plane reads it again and watches it.
		if _, err := agenttoken.Load(p.agentTokensFile, nil); err != nil {
			return usageError("--agent-tokens-file: %v", err)
		}
	}
	if p.usersFile != "" {
		if _, err := identity.Load(p.usersFile, nil); err != nil {
			return usageError("--users-file: %v", err)
		}
	}
	switch {
	case p.viewerToken != "" && (p.viewerToken == p.operatorToken || p.viewerToken == p.agentToken):
		return usageError("--viewer-token: must differ from --operator-token and --agent-token, or the read-only role could change state")
	case p.heartbeatInterval < controlplane.MinHeartbeatInterval || p.heartbeatInterval > controlplane.MaxHeartbeatInterval:
		return usageError("--heartbeat-interval: %s is outside 1s..2m", p.heartbeatInterval)
	case p.tickInterval < 10*time.Millisecond || p.tickInterval > time.Minute:
		return usageError("--tick-interval: %s is outside 10ms..1m", p.tickInterval)
	}
	if err := p.conns.validate(); err != nil {
		return err
	}
	if err := p.recovery.thresholds().Validate(p.heartbeatInterval); err != nil {
		return usageError("%v", nameThresholdFields(err, p.recovery.flags))
	}
	if err := p.recovery.retention.Validate(); err != nil {
		return usageError("%v", err)
	}
	if err := p.notify.validate(); err != nil {
		return err
	}
	if err := p.recovery.massSilence.Validate(); err != nil {
		return usageError("%v", err)
	}
	return nil
}

// recoveryOpts are the reaper settings, the `recovery:` section of the
// config file (Strøm recovery section; docs/design.md §6, §7).
type recoveryOpts struct {
	agentLost, dispatchLost, orphan, sweepInterval time.Duration
	retention                                      scheduler.Retention
	massSilence                                    reaper.MassSilence
	flags                                          *pflag.FlagSet // names a rejected threshold's source
}

// configSection marks flags that live under a section of the YAML config
// file (recovery.agent-lost-threshold); bindConfig reads that key too.
const configSection = "vigil/config-section"

// addRecoveryFlags adds the reaper flags to cmd.
func addRecoveryFlags(cmd *cobra.Command) *recoveryOpts {
	r := &recoveryOpts{flags: cmd.Flags()}
	f := cmd.Flags()
	f.DurationVar(&r.agentLost, "agent-lost-threshold", reaper.DefaultAgentLost, "running TI silent this long is reaped (≥ 2 × heartbeat interval, 1s..2h)")
	f.DurationVar(&r.dispatchLost, "dispatch-lost-threshold", reaper.DefaultDispatchLost, "queued TI no active agent can take is failed after this long (1s..24h)")
	f.DurationVar(&r.orphan, "orphan-threshold", reaper.DefaultOrphan, "running run with nothing active is finalized after this long unchanged (1s..24h)")
	f.DurationVar(&r.sweepInterval, "sweep-interval", scheduler.DefaultSweepInterval, "how often the reapers run (100ms..10m)")
	f.Float64Var(&r.massSilence.Fraction, "mass-silence-fraction", reaper.DefaultMassSilenceFraction,
		"hold agent-lost and dispatch-lost reaping while more than this fraction of active agents went silent within one agent-lost threshold (0 disables; below 1)")
	f.IntVar(&r.massSilence.MinAgents, "mass-silence-min-agents", reaper.DefaultMassSilenceMinAgents,
		"the mass-silence brake judges only when at least this many agents were active (≥ 1)")
	for _, name := range []string{"agent-lost-threshold", "dispatch-lost-threshold", "orphan-threshold", "sweep-interval",
		"mass-silence-fraction", "mass-silence-min-agents"} {
		_ = f.SetAnnotation(name, configSection, []string{"recovery"})
	}
	f.DurationVar(&r.retention.Runs, "retention-runs", scheduler.DefaultRetentionRuns, "keep terminal runs (with TIs, events, logs) this long; 0 disables (≥ 1h)")
	f.DurationVar(&r.retention.Agents, "retention-agents", scheduler.DefaultRetentionAgents, "keep inactive or deregistered agents this long; 0 disables (≥ 1h)")
	f.DurationVar(&r.retention.Audit, "retention-audit", scheduler.DefaultRetentionAudit, "keep audit log rows this long; 0 disables (≥ 1h)")
	f.DurationVar(&r.retention.Interval, "retention-interval", scheduler.DefaultRetentionInterval, "how often the leader prunes (1m..24h)")
	f.DurationVar(&r.retention.Notifications, "retention-notifications", scheduler.DefaultRetentionNotifications,
		"keep delivered and dead notifications this long after they finished; 0 disables (≥ 1h)")
	for _, name := range []string{"retention-runs", "retention-agents", "retention-audit", "retention-interval", "retention-notifications"} {
		_ = f.SetAnnotation(name, configSection, []string{"retention"})
	}
	return r
}

func (r *recoveryOpts) thresholds() reaper.Thresholds {
	return reaper.Thresholds{AgentLost: r.agentLost, DispatchLost: r.dispatchLost, Orphan: r.orphan}
}

func newLiteCmd() *cobra.Command {
	o := &liteOpts{}
	cmd := &cobra.Command{
		Use:   "lite",
		Short: "Run Vigil Lite: API, scheduler and in-process agents in one process",
		Args:  noArgs,
	}
	cmd.RunE = runE(o.validate, func(ctx context.Context, log *slog.Logger) error { return runLite(ctx, o, log) })
	f := cmd.Flags()
	f.StringVar(&o.databaseURL, "database-url", "", "PostgreSQL URL; empty starts a private cluster under --data-dir")
	f.StringVar(&o.dataDir, "data-dir", ".vigil", "directory for the private PostgreSQL cluster and generated tokens")
	f.StringVar(&o.dags, "dags", "", "directory (or file) of DAG specs to apply at startup")
	f.IntVar(&o.agents, "agents", 2, "number of in-process agents (0..64)")
	f.IntVar(&o.agentCapacity, "agent-capacity", 4, "concurrent task instances per in-process agent (1..1024)")
	f.StringSliceVar(&o.agentTags, "agent-tags", nil, "tags of the in-process agents, comma-separated")
	addClaimWindowFlag(f, "agent-claim-window", &o.windowFlag)
	f.DurationVar(&o.drainTimeout, "drain-timeout", 5*time.Minute, "on shutdown, how long in-process agents let running tasks finish")
	addDatabaseWaitFlag(f, &o.databaseWait)
	addTaskUserFlags(f, "", &o.taskUsers)
	addPlaneFlags(cmd, &o.planeOpts, "; empty: generated into --data-dir")
	return cmd
}

func (o *liteOpts) validate() error {
	if err := resolveSecrets(o.secretFiles...); err != nil {
		return err
	}
	switch {
	case o.agents < 0 || o.agents > controlplane.MaxLocalAgents:
		return usageError("--agents: %d is outside 0..%d", o.agents, controlplane.MaxLocalAgents)
	case o.agentCapacity < 1 || o.agentCapacity > 1024:
		return usageError("--agent-capacity: %d is outside 1..1024", o.agentCapacity)
	case o.drainTimeout < 0:
		return usageError("--drain-timeout: must not be negative")
	case o.databaseURL == "" && o.dataDir == "":
		return usageError("--data-dir: required when --database-url is empty")
	}
	if err := validateDatabaseWait(o.databaseWait); err != nil {
		return err
	}
	if err := o.taskUsers.check(); err != nil {
		return err
	}
	var err error
	if o.claimWindow, err = claimWindowConfig("--agent-claim-window", o.windowFlag); err != nil {
		return err
	}
	if err := o.validateLeaderTimeouts(0); err != nil {
		return err
	}
	return o.planeOpts.validate()
}

func runLite(ctx context.Context, o *liteOpts, log *slog.Logger) error {
	cfg, err := o.config(log)
	if err != nil {
		return err
	}
	cfg.DatabaseURL, cfg.DatabaseWait, cfg.DataDir, cfg.DAGs = o.databaseURL, o.databaseWait, o.dataDir, o.dags
	cfg.Agents = controlplane.LocalAgents{
		Count: o.agents, Capacity: o.agentCapacity, Tags: o.agentTags, ClaimWindow: o.claimWindow, DrainTimeout: o.drainTimeout,
		TaskUser: o.taskUsers.user, TaskUsersAllowed: o.taskUsers.allowed,
	}
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return startError(ctx, log, err, o.recovery.flags)
	}
	log.Info("vigil lite ready", "api", cp.URL(), "agents", o.agents,
		"operator_token_file", filepath.Join(o.dataDir, "operator.token"))
	<-ctx.Done()
	log.Info("shutting down: draining agents")
	return cp.Stop(context.Background())
}

// config is the control plane's Config of the shared flags; the caller
// adds Lite's or Pro's.
func (p *planeOpts) config(log *slog.Logger) (controlplane.Config, error) {
	tlsCfg, err := p.tls.config()
	if err != nil {
		return controlplane.Config{}, err
	}
	return controlplane.Config{
		Logger: log, Version: version, Listen: p.listen, TLS: tlsCfg,
		AgentToken: p.agentToken, OperatorToken: p.operatorToken, ViewerToken: p.viewerToken, AgentTokensFile: p.agentTokensFile,
		UsersFile: p.usersFile, TickInterval: p.tickInterval, HeartbeatInterval: p.heartbeatInterval,
		Thresholds: p.recovery.thresholds(), SweepInterval: p.recovery.sweepInterval,
		Retention: p.recovery.retention, MassSilence: &p.recovery.massSilence,
		LeaderTimeouts: p.leaderTimeouts, Pools: p.conns.pools, BulkLimit: p.conns.agentConns,
		SecretsKeyFile: p.secretsKeyFile, Notify: p.notify.config(),
	}, nil
}

// configFlags names the flag of each controlplane.Config field a
// controlplane.FieldError may name.
var configFlags = map[string]string{
	"Listen": "listen", "DatabaseURL": "database-url", "DatabaseWait": "database-wait", "DataDir": "data-dir",
	"DAGs": "dags", "AgentToken": "agent-token", "OperatorToken": "operator-token", "ViewerToken": "viewer-token",
	"HeartbeatInterval": "heartbeat-interval", "BulkLimit": "db-agent-conns", "Agents.Count": "agents",
	"Agents.DrainTimeout": "drain-timeout", "Pro.Endpoints": "etcd-endpoints", "Agents": "task-user", "AgentTokensFile": "agent-tokens-file",
	"UsersFile":      "users-file",
	"SecretsKeyFile": "secrets-key-file",
}

// startError words an error of controlplane.Start for the command line: a
// signal during start-up is a clean stop (exit 0, like any other stop); a
// field is named by its flag; a refused Config is a usage error (exit 2)
// whose thresholds name the flag, variable or file key they came from.
func startError(ctx context.Context, log *slog.Logger, err error, flags *pflag.FlagSet) error {
	if ctx.Err() != nil {
		log.Info("shutting down: stopped at start-up before the database was reached", "err", err)
		return nil
	}
	usage := errors.Is(err, controlplane.ErrConfig)
	var fe *controlplane.FieldError
	if errors.As(err, &fe) {
		if flag, ok := configFlags[fe.Field]; ok {
			msg := fe.Named("--" + flag)
			if fe.Field == "Listen" && errors.Is(err, syscall.EADDRINUSE) {
				msg += " with --listen, e.g. --listen 127.0.0.1:8081"
			}
			err = errors.New(msg)
		}
	}
	if usage {
		return usageError("%v", nameThresholdFields(err, flags))
	}
	return err
}

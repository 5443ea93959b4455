package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vigil-sched/vigil/agent"
	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/cluster"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/scheduler"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/pgcluster"
	"github.com/vigil-sched/vigil/web"
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
	planeOpts
}

// planeOpts are the control-plane flags `vigil lite` and `vigil server`
// share: listen address, tokens, intervals, recovery and retention.
type planeOpts struct {
	listen                          string
	ln                              net.Listener // listenAPI(listen), taken early; nil: listen here
	agentToken, operatorToken       string
	viewerToken                     string // optional: the read-only role
	tickInterval, heartbeatInterval time.Duration
	recovery                        *recoveryOpts
	leaderTimeouts                  store.LeaderTimeouts // zero fields: derived from the TTL
	secretFiles                     []*secretFile        // --agent-token-file, --operator-token-file (secrets.go)
	tls                             serveTLSOpts         // --tls-cert-file, --tls-key-file, --tls-client-ca-file (tls.go)
	conns                           connOpts             // --db-max-conns, --db-heartbeat-conns, --db-agent-conns (conns.go)
}

// addPlaneFlags adds the shared control-plane flags to cmd; tokenHelp
// completes the token flags' help.
func addPlaneFlags(cmd *cobra.Command, p *planeOpts, tokenHelp string) {
	f := cmd.Flags()
	f.StringVar(&p.listen, "listen", "127.0.0.1:8080", "HTTP listen address for the API, metrics and health")
	f.StringVar(&p.agentToken, "agent-token", "", "bearer token for agents"+tokenHelp)
	f.StringVar(&p.operatorToken, "operator-token", "", "bearer token for operators"+tokenHelp)
	f.StringVar(&p.viewerToken, "viewer-token", "", "optional bearer token of the read-only viewer role (API and console); must differ from the others")
	p.secretFiles = append(p.secretFiles, addSecretFile(f, "agent-token", &p.agentToken), addSecretFile(f, "operator-token", &p.operatorToken),
		addSecretFile(f, "viewer-token", &p.viewerToken))
	addServeTLSFlags(f, &p.tls)
	f.DurationVar(&p.tickInterval, "tick-interval", scheduler.DefaultInterval, "scheduler tick interval (10ms..1m)")
	f.DurationVar(&p.heartbeatInterval, "heartbeat-interval", scheduler.DefaultHeartbeatInterval, "agent heartbeat interval told to agents (1s..2m)")
	p.recovery = addRecoveryFlags(cmd)
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

// storeOptions resolves the leader timeouts against the election TTL (0:
// Lite, store.DefaultElectionTTL); errors name the flag and the rule.
func (p *planeOpts) storeOptions(ttl time.Duration) (store.Options, error) {
	lt, err := p.leaderTimeouts.Resolve(ttl)
	if err != nil {
		return store.Options{}, usageError("%v", err)
	}
	pools, _, err := p.conns.resolve()
	if err != nil {
		return store.Options{}, err
	}
	return store.Options{ElectionTTL: ttl, LeaderTimeouts: lt, Pools: pools}, nil
}

// validate checks the shared flags; errors name the flag (exit 2).
func (p *planeOpts) validate() error {
	if _, err := p.tls.config(); err != nil {
		return err
	}
	switch {
	case p.viewerToken != "" && (p.viewerToken == p.operatorToken || p.viewerToken == p.agentToken):
		return usageError("--viewer-token: must differ from --operator-token and --agent-token, or the read-only role could change state")
	case p.heartbeatInterval < time.Second || p.heartbeatInterval > 2*time.Minute:
		return usageError("--heartbeat-interval: %s is outside 1s..2m", p.heartbeatInterval)
	case p.tickInterval < 10*time.Millisecond || p.tickInterval > time.Minute:
		return usageError("--tick-interval: %s is outside 10ms..1m", p.tickInterval)
	}
	if _, _, err := p.conns.resolve(); err != nil {
		return err
	}
	if err := p.recovery.thresholds().Validate(p.heartbeatInterval); err != nil {
		return usageError("%v", nameThresholdFields(err, p.recovery.flags))
	}
	if err := p.recovery.retention.Validate(); err != nil {
		return usageError("%v", err)
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
	f.DurationVar(&r.retention.Interval, "retention-interval", scheduler.DefaultRetentionInterval, "how often the leader prunes (1m..24h)")
	for _, name := range []string{"retention-runs", "retention-agents", "retention-interval"} {
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
	addPlaneFlags(cmd, &o.planeOpts, "; empty: generated into --data-dir")
	return cmd
}

func (o *liteOpts) validate() error {
	if err := resolveSecrets(o.secretFiles...); err != nil {
		return err
	}
	switch {
	case o.agents < 0 || o.agents > 64:
		return usageError("--agents: %d is outside 0..64", o.agents)
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
	var err error
	if o.claimWindow, err = claimWindowConfig("--agent-claim-window", o.windowFlag); err != nil {
		return err
	}
	if _, err := o.storeOptions(0); err != nil {
		return err
	}
	return o.planeOpts.validate()
}

func runLite(ctx context.Context, o *liteOpts, log *slog.Logger) error {
	// Take the listen port first: a busy port must fail in milliseconds,
	// before initdb and the migrations have done minutes of work.
	ln, err := listenAPI(o.listen)
	if err != nil {
		return err
	}
	defer ln.Close() // a no-op once the API server has taken it over
	url := o.databaseURL
	if url == "" {
		cluster, err := pgcluster.Start(ctx, pgcluster.Config{Dir: filepath.Join(o.dataDir, "pg"), Logger: log})
		if err != nil {
			return fmt.Errorf("private PostgreSQL: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cluster.Stop(sctx); err != nil {
				log.Error("stopping private PostgreSQL", "err", err)
			}
		}()
		url = cluster.URL("vigil")
		log.Info("private PostgreSQL started", "dir", cluster.Dir(), "port", cluster.Port())
	}
	agentToken, err := tokenOrGenerate(o.agentToken, o.dataDir, "agent.token")
	if err != nil {
		return err
	}
	opToken, err := tokenOrGenerate(o.operatorToken, o.dataDir, "operator.token")
	if err != nil {
		return err
	}
	opts, err := o.storeOptions(0)
	if err != nil {
		return err
	}
	// The private cluster is up once pgcluster.Start returns: no wait.
	wait := o.databaseWait
	if o.databaseURL == "" {
		wait = 0
	}
	st, err := openMigrated(ctx, log, wait, url, opts)
	if err != nil {
		return stoppedWaiting(ctx, log, err)
	}
	defer st.Close()
	if o.dags != "" {
		if err := applyDAGDir(ctx, st, o.dags, log); err != nil {
			return err
		}
	}
	cp, err := startControlPlane(ctx, controlPlaneConfig{
		store: st, log: log, listen: o.listen, ln: ln, agentToken: agentToken, operatorToken: opToken, viewerToken: o.viewerToken, tls: &o.tls,
		tickInterval: o.tickInterval, heartbeatInterval: o.heartbeatInterval, recovery: o.recovery, conns: o.conns,
		elector: func(m *metrics.Metrics) (leader.Elector, error) {
			return leader.NewStatic(st, replicaID(), log, m), nil
		},
	})
	if err != nil {
		return err
	}
	agentsDone := startLocalAgents(ctx, o, cp.local, agentToken, log)
	log.Info("vigil lite ready", "api", cp.url, "agents", o.agents,
		"operator_token_file", filepath.Join(o.dataDir, "operator.token"))
	<-ctx.Done()
	log.Info("shutting down: draining agents")
	agentsDone.Wait()
	return cp.shutdown()
}

// listenAPI opens the API's listen address. A port already in use is an
// error naming --listen with a hint to pick another; callers take it
// before any slow start-up work (initdb, migrations).
func listenAPI(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("--listen %s: the address is already in use (another vigil or another program holds it); "+
			"stop it or pick a free address with --listen, e.g. --listen 127.0.0.1:8081", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	return ln, nil
}

// controlPlaneConfig is what Lite and Pro share: store, API, scheduler and
// an elector.
type controlPlaneConfig struct {
	store                           *store.Store
	log                             *slog.Logger
	listen                          string
	ln                              net.Listener // listenAPI(listen), taken early; nil: listen here
	agentToken, operatorToken       string
	viewerToken                     string
	tickInterval, heartbeatInterval time.Duration
	recovery                        *recoveryOpts
	elector                         func(*metrics.Metrics) (leader.Elector, error)
	tls                             *serveTLSOpts // nil or no files: plain HTTP
	// electionTTL is Pro's --election-ttl (0 in Lite), for the failover
	// rule of reaper.Thresholds.ValidateTiming.
	electionTTL time.Duration
	conns       connOpts // the API's bulk limit (--db-agent-conns)
}

type controlPlane struct {
	url      string   // public base URL: http(s)://host:port
	local    localAPI // how in-process agents reach the API
	shutdown func() error
}

// startControlPlane serves the API on cfg.listen and runs the elector with
// the scheduler as its leader work. Its shutdown stops the HTTP server,
// then leadership, then the listener.
func startControlPlane(ctx context.Context, cfg controlPlaneConfig) (*controlPlane, error) {
	m := metrics.New()
	listener := cfg.store.Listen(context.Background(), cfg.log, store.ChanScheduler, store.ChanQueued, store.ChanReap)
	sched, err := scheduler.New(scheduler.Config{
		Store: cfg.store, Listener: listener, Metrics: m, Logger: cfg.log, Interval: cfg.tickInterval,
		Thresholds: cfg.recovery.thresholds(), HeartbeatInterval: cfg.heartbeatInterval, ElectionTTL: cfg.electionTTL,
		SweepInterval: cfg.recovery.sweepInterval, Retention: cfg.recovery.retention,
		MassSilence: &cfg.recovery.massSilence,
	})
	if err != nil {
		listener.Close()
		return nil, usageError("%v", nameThresholdFields(err, cfg.recovery.flags))
	}
	el, err := cfg.elector(m)
	if err != nil {
		listener.Close()
		return nil, usageError("%v", err)
	}
	_, bulk, err := cfg.conns.resolve()
	if err != nil {
		listener.Close()
		return nil, err
	}
	srv, err := api.New(api.Config{
		Store: cfg.store, Listener: listener, Metrics: m, Logger: cfg.log,
		AgentToken: cfg.agentToken, OperatorToken: cfg.operatorToken, ViewerToken: cfg.viewerToken,
		HeartbeatInterval: cfg.heartbeatInterval, Control: sched, LeaderStatus: el.Status, Version: version,
		Console: web.Handler(), BulkLimit: bulk,
	})
	if err != nil {
		listener.Close()
		return nil, usageError("%v", err)
	}
	if !web.Built() {
		cfg.log.Warn("the web console was built without its npm libraries (run make web): run graphs are shown as task lists")
	}
	ln := cfg.ln
	if ln == nil {
		if ln, err = listenAPI(cfg.listen); err != nil {
			listener.Close()
			return nil, err
		}
	}
	httpSrv := api.NewHTTPServer(srv.Handler(), api.DefaultTimeouts())
	httpSrv.RegisterOnShutdown(srv.Drain)
	public, local, err := serveAPI(httpSrv, ln, cfg.tls, cfg.log)
	if err != nil {
		_ = ln.Close()
		listener.Close()
		return nil, err
	}
	leadCtx, stopLeading := context.WithCancel(context.Background())
	electorDone := make(chan error, 1)
	go func() {
		electorDone <- el.Run(leadCtx, leader.Callbacks{OnStartedLeading: sched.Lead})
	}()
	// Every replica publishes its own row for GET /v1/cluster.
	pub := &cluster.Publisher{Store: cfg.store, Status: el.Status, Report: sched.Report, Version: version, Logger: cfg.log}
	publishDone := make(chan error, 1)
	go func() { publishDone <- pub.Run(leadCtx) }()
	shutdown := func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Hand leadership over first (Pro: Resign, so a follower takes over
		// in milliseconds), while this replica still serves its agents.
		if r, ok := el.(interface{ Resign(context.Context) error }); ok {
			if err := r.Resign(sctx); err != nil {
				cfg.log.Warn("resign failed; the lease will expire on its own", "err", err)
			}
		}
		err := httpSrv.Shutdown(sctx)
		stopLeading()
		if eerr := <-electorDone; eerr != nil {
			err = errors.Join(err, eerr)
		}
		if perr := <-publishDone; perr != nil {
			err = errors.Join(err, perr)
		}
		listener.Close()
		return err
	}
	return &controlPlane{url: public, local: local, shutdown: shutdown}, nil
}

// startLocalAgents runs o.agents in-process agents against the local API
// through the same HTTP protocol as remote ones. The returned WaitGroup is
// done once every agent has drained after ctx is cancelled.
func startLocalAgents(ctx context.Context, o *liteOpts, server localAPI, token string, log *slog.Logger) *sync.WaitGroup {
	var wg sync.WaitGroup
	host, _ := os.Hostname()
	for i := 1; i <= o.agents; i++ {
		a, err := agent.New(agent.Config{
			// The pid makes the names this process's own: a restarted
			// Lite must not need the credentials of its predecessor's
			// agents, whose registrations stay live for one agent-lost
			// threshold (a name held by a live agent is refused).
			Servers: []string{server.url}, HTTPClient: server.client, Token: token, Name: fmt.Sprintf("%s-%d-lite-%d", host, os.Getpid(), i),
			Tags: o.agentTags, Capacity: o.agentCapacity, ClaimWindow: o.claimWindow, DrainTimeout: o.drainTimeout,
			Logger: log, // the agent adds its name; "agent", i would be a third id
		})
		if err != nil {
			log.Error("in-process agent", "err", err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Run(ctx); err != nil {
				log.Error("in-process agent stopped", "agent", i, "err", err)
			}
		}()
	}
	return &wg
}

// applyDAGDir validates every spec under path before storing any.
func applyDAGDir(ctx context.Context, st *store.Store, path string, log *slog.Logger) error {
	specs, err := dag.LoadPaths(path)
	if err != nil {
		return fmt.Errorf("--dags: %w", err)
	}
	for _, spec := range specs {
		res, err := st.ApplyDAG(ctx, spec)
		if err != nil {
			return err
		}
		log.Info("dag applied", "dag_id", spec.DAGID, "result", res)
	}
	return nil
}

// tokenOrGenerate returns explicit, else the token stored in dir/name,
// else a new random token written there with mode 0600.
func tokenOrGenerate(explicit, dir, name string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	path := filepath.Join(dir, name)
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(buf)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("--data-dir %s: %w", dir, err)
	}
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return tok, nil
}

// replicaID is hostname-pid, the default replica identity.
func replicaID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

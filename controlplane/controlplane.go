// Package controlplane assembles one Vigil control plane from a Config:
// the store (opened and migrated, or Lite's private PostgreSQL), the API
// server, the scheduler run as the leader work of an elector (Lite: static;
// Pro: etcd), the replica's cluster row, and Lite's in-process agents
// (docs/design.md §1, §9; adr/0028-control-plane-assembly.md). The binary,
// the tests and the bench build a control plane only through Start.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/cluster"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/notify"
	"github.com/vigil-sched/vigil/scheduler"
	"github.com/vigil-sched/vigil/secrets"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/web"
)

// ControlPlane is a started control plane. Stop ends it; the zero value
// and a nil *ControlPlane are stopped ones.
type ControlPlane struct {
	url                       string
	agentToken, operatorToken string

	// stops undo Start's steps, last first.
	stops    []func(context.Context) error
	stopOnce sync.Once
	stopErr  error
}

// Start assembles and starts the control plane of cfg and returns once the
// API serves (Lite: the in-process agents are started too). ctx bounds the
// start-up only: cancelling it during the database wait returns ctx's
// error; the control plane then runs until Stop. Errors name the Config
// field (*FieldError); those of a Config refused before anything started
// wrap ErrConfig. On an error everything already started is stopped.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, invalid(err)
	}
	c := &ControlPlane{}
	if err := c.start(ctx, cfg); err != nil {
		return nil, errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
	}
	return c, nil
}

// start runs the steps of Start, recording how to undo each in c.stops.
func (c *ControlPlane) start(ctx context.Context, cfg Config) error {
	ln, err := Listen(cfg.Listen)
	if err != nil {
		return err
	}
	c.onStop(func(context.Context) error { _ = ln.Close(); return nil }) // a no-op once the API server has taken it over
	if cfg.Pro == nil {
		if err := c.liteDatabase(ctx, &cfg); err != nil {
			return err
		}
	}
	c.agentToken, c.operatorToken = cfg.AgentToken, cfg.OperatorToken
	st, err := OpenStore(ctx, Database{URL: cfg.DatabaseURL, Wait: cfg.DatabaseWait, Options: cfg.storeOptions(), Migrate: true, Logger: cfg.Logger})
	if err != nil {
		return within("Database", err)
	}
	c.onStop(func(context.Context) error { st.Close(); return nil })
	box, err := openSecrets(ctx, cfg, st)
	if err != nil {
		return err
	}
	if cfg.DAGs != "" {
		if err := applyDAGs(ctx, st, cfg.DAGs, cfg.Logger); err != nil {
			return err
		}
	}
	elector, err := c.elector(cfg, st)
	if err != nil {
		return err
	}
	local, err := c.serve(cfg, st, box, ln, elector)
	if err != nil {
		return err
	}
	if cfg.Pro == nil {
		return c.startLocalAgents(cfg, local)
	}
	return nil
}

// onStop pushes an undo step.
func (c *ControlPlane) onStop(f func(context.Context) error) { c.stops = append(c.stops, f) }

// URL is the API's public base URL: http(s)://host:port.
func (c *ControlPlane) URL() string { return c.url }

// AgentToken is the agents' token: Config.AgentToken, or the one Lite read
// or generated.
func (c *ControlPlane) AgentToken() string { return c.agentToken }

// OperatorToken is the operators' token, as AgentToken.
func (c *ControlPlane) OperatorToken() string { return c.operatorToken }

// Stop stops what Start started, last first: Lite's agents drain (up to
// Agents.DrainTimeout), leadership is handed over (Pro: resigned, so a
// follower takes over in milliseconds) while the API still serves, the API
// closes, then the elector, the store and Lite's private PostgreSQL stop.
// Handing over and closing the API are bounded by 10s and stopping
// PostgreSQL by 30s, or sooner by ctx. It tolerates a control plane never
// started and a second call, which returns the first one's result.
func (c *ControlPlane) Stop(ctx context.Context) error {
	if c == nil {
		return nil
	}
	c.stopOnce.Do(func() {
		var errs []error
		for i := len(c.stops) - 1; i >= 0; i-- {
			errs = append(errs, c.stops[i](ctx))
		}
		c.stops = nil
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// serve builds the scheduler and the API, serves the API on ln and runs the
// elector with the scheduler as its leader work, and the replica's cluster
// row publisher.
func (c *ControlPlane) serve(cfg Config, st *store.Store, box *secrets.Box, ln net.Listener, newElector func(*metrics.Metrics) (leader.Elector, error)) (localAPI, error) {
	if cfg.Pro != nil {
		cfg.Logger = cfg.Logger.With("replica", cfg.Pro.ReplicaID) // the elector names its replica itself
	}
	m := metrics.New()
	listener := st.Listen(context.Background(), cfg.Logger, store.ChanScheduler, store.ChanQueued, store.ChanReap, store.ChanStop,
		store.ChanNotify)
	c.onStop(func(context.Context) error { listener.Close(); return nil })
	notifyCfg := cfg.Notify
	notifyCfg.Store, notifyCfg.Metrics, notifyCfg.Logger, notifyCfg.Secrets = st, m, cfg.Logger, box
	wake, unsubNotify := listener.Subscribe(store.ChanNotify)
	c.onStop(func(context.Context) error { unsubNotify(); return nil })
	notifyCfg.Wake = wake
	if err := notifyCfg.Validate(); err != nil {
		return localAPI{}, invalid(err)
	}
	sched, err := scheduler.New(scheduler.Config{
		Store: st, Listener: listener, Metrics: m, Logger: cfg.Logger, Interval: cfg.TickInterval,
		Thresholds: cfg.Thresholds, HeartbeatInterval: cfg.HeartbeatInterval, ElectionTTL: cfg.electionTTL(),
		SweepInterval: cfg.SweepInterval, Retention: cfg.Retention, MassSilence: cfg.MassSilence,
		Services: notify.Services(notifyCfg),
	})
	if err != nil {
		return localAPI{}, invalid(err)
	}
	el, err := newElector(m)
	if err != nil {
		return localAPI{}, invalid(err)
	}
	// Every replica publishes its own row for GET /v1/cluster.
	report := func() any { return api.ReplicaReport(sched.Report()) }
	pub, err := cluster.NewPublisher(cluster.Config{Store: st, Status: el.Status, Report: report, Version: cfg.Version, Logger: cfg.Logger})
	if err != nil {
		return localAPI{}, invalid(err)
	}
	tokens, err := c.agentTokens(cfg)
	if err != nil {
		return localAPI{}, err
	}
	users, err := c.users(cfg, m.UsersFileReloadFailures.Inc)
	if err != nil {
		return localAPI{}, err
	}
	srv, err := api.New(api.Config{
		Store: st, Listener: listener, Metrics: m, Logger: cfg.Logger,
		AgentToken: cfg.AgentToken, OperatorToken: cfg.OperatorToken, ViewerToken: cfg.ViewerToken, AgentTokens: tokens, Users: users,
		HeartbeatInterval: cfg.HeartbeatInterval, Control: sched, LeaderStatus: el.Status, Version: cfg.Version,
		Console: web.Handler(), BulkLimit: cfg.bulkLimit(), Secrets: box, Notify: notify.NewDeliverer(notifyCfg),
	})
	if err != nil {
		return localAPI{}, invalid(err)
	}
	if !web.Built() {
		cfg.Logger.Warn("the web console was built without its npm libraries (run make web): run graphs are shown as task lists")
	}
	httpSrv := api.NewHTTPServer(srv.Handler(), api.DefaultTimeouts())
	httpSrv.RegisterOnShutdown(srv.Drain)
	public, local := serveAPI(httpSrv, ln, cfg.TLS, cfg.Logger)
	c.url = public
	leadCtx, stopLeading := context.WithCancel(context.Background())
	electorDone := make(chan error, 1)
	go func() {
		electorDone <- el.Run(leadCtx, leader.Callbacks{OnStartedLeading: sched.Lead})
	}()
	publishDone := make(chan error, 1)
	go func() { publishDone <- pub.Run(leadCtx) }()
	c.onStop(func(ctx context.Context) error {
		sctx, cancel := context.WithTimeout(ctx, shutdownTimeout)
		defer cancel()
		// Hand leadership over first (Pro: Resign, so a follower takes over
		// in milliseconds), while this replica still serves its agents.
		if r, ok := el.(interface{ Resign(context.Context) error }); ok {
			if err := r.Resign(sctx); err != nil {
				cfg.Logger.Warn("resign failed; the lease will expire on its own", "err", err)
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
		return err
	})
	return local, nil
}

// ReplicaID is hostname-pid, the default replica identity.
func ReplicaID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

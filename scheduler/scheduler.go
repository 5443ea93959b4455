// Package scheduler is Vigil's leader work (docs/design.md §5, §6): while its
// replica leads, it runs the incremental scheduler tick, the reconcile
// safety net and the schedules, and beside them the small service types
// of its other files (stall detector, settings, ti_counts, retention) and
// one reaper.Service per reaper: each an independent maintenance.Service
// with its own interval, started when the term begins and stopped, all of
// them, when it ends (adr/0011-incremental-scheduler.md,
// adr/0012-maintenance-services.md).
//
// The leader holds no state a new leader would need: every decision is
// read from PostgreSQL, so a fresh leader picks up where the last one
// stopped (KiCI startup recovery). Every write is fenced by the term's
// epoch.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/maintenance"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// Defaults (docs/design.md §5, §6).
const (
	DefaultInterval          = time.Second
	DefaultSweepInterval     = reaper.DefaultSweepInterval
	DefaultHeartbeatInterval = 15 * time.Second
	// DefaultReconcileInterval is how often the safety net re-derives
	// every live run.
	DefaultReconcileInterval = time.Minute
	// DefaultTickBatch bounds the dirty runs one fenced pass takes.
	DefaultTickBatch = 256
	// DefaultReconcileBatch bounds the runs one reconcile transaction takes.
	DefaultReconcileBatch = 500
	// wakeCoalesce is how long a woken tick waits so a burst of
	// completions costs one pass.
	wakeCoalesce = 5 * time.Millisecond
)

// Config configures a Scheduler. Store and Metrics are required.
type Config struct {
	Store    *store.Store
	Listener *store.Listener // optional: wake on NOTIFY
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
	Interval time.Duration // tick interval; default DefaultInterval; 10ms..1m
	// Thresholds are the configured reaper thresholds (default
	// reaper.DefaultThresholds); runtime overrides sit on top.
	Thresholds reaper.Thresholds
	// HeartbeatInterval is the agents' heartbeat interval, for the
	// "agent-lost ≥ 2 × heartbeat" rule; default 15s.
	HeartbeatInterval time.Duration
	// ElectionTTL is Pro's etcd session TTL, for the failover rule of
	// reaper.Thresholds.ValidateTiming; 0 (Lite) skips that rule.
	ElectionTTL time.Duration
	// SweepInterval is each reaper service's interval; default 10s,
	// 100ms..10m.
	SweepInterval time.Duration
	// ReconcileInterval is the safety net's interval; default 1m, 1s..1h.
	ReconcileInterval time.Duration
	// TickBatch and ReconcileBatch bound the runs per fenced transaction;
	// defaults DefaultTickBatch and DefaultReconcileBatch.
	TickBatch, ReconcileBatch int
	// TickTIs bounds the non-terminal TIs summed over the runs of one tick
	// or reconcile transaction (the first run is always taken); default
	// store.DefaultPassTIs (adr/0011-incremental-scheduler.md, "Amendment").
	TickTIs int
	// Clock is what reapers compare thresholds against and what the stall
	// detector reads; default the database clock on a dedicated connection.
	Clock     reaper.Clock
	Retention Retention
	// MassSilence configures the mass-silence brake on agent-lost and
	// dispatch-lost reaping; nil means reaper.DefaultMassSilence() (50 %
	// of at least 3 active agents), a zero Fraction disables it.
	MassSilence *reaper.MassSilence
	// Services, when set, returns more leader services of one term,
	// started and stopped with the others: notification delivery and the
	// sla service (notify.Services).
	Services func(epoch int64) []*maintenance.Service
	// TestSignals are for tests only; the zero value, which production
	// uses, does nothing.
	TestSignals TestSignals
}

// TestSignals are the points where a test steps into the scheduler's
// passes. Every field is optional; production leaves them all nil.
type TestSignals struct {
	// TickStarted runs at the start of every tick, with the tick's
	// context: a test holds the tick in it to make the service slow.
	TickStarted func(ctx context.Context)
}

// Scheduler runs the leader's services while its replica leads: the
// tick, reconcile and schedules passes are its own; the stall detector,
// settings, ti_counts, retention and one service per reaper are small
// types of their own that it starts and stops with the term. It is safe
// for concurrent use: Heartbeat, SweepNow and the threshold API may be
// called from HTTP handlers at any time.
type Scheduler struct {
	cfg      Config
	log      *slog.Logger
	reapers  *reaper.Reapers
	leading  atomic.Bool
	lastTick atomic.Int64 // unix nanoseconds of the last finished tick

	settings  *settings
	tiCounts  *tiCounts
	retention *retention
	reaping   []*reaper.Service // one per reaper.Names, in that order

	mu    sync.Mutex
	term  *reaper.Term       // nil when not leading
	group *maintenance.Group // the current term's services; nil when not leading
	stall *stallDetector

	pace pacer
}

// New validates cfg and returns a Scheduler. Errors name the field.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Store == nil {
		return nil, errors.New("scheduler: Store is required")
	}
	if cfg.Metrics == nil {
		return nil, errors.New("scheduler: Metrics is required")
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if err := cfg.Retention.Validate(); err != nil {
		return nil, err
	}
	if err := validateConfigThresholds(cfg); err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, log: cfg.Logger.With("component", "scheduler")}
	s.settings = newSettings(settingsConfig{Configured: cfg.Thresholds, Timing: cfg.timing(), Interval: cfg.SweepInterval},
		cfg.Store, s.log)
	s.tiCounts = newTICounts(tiCountsConfig{Interval: cfg.SweepInterval}, cfg.Store, cfg.Metrics)
	s.retention = newRetention(cfg.Retention, cfg.Store, cfg.Metrics, s.log)
	r, err := reaper.New(reaper.Config{
		Store: cfg.Store, Metrics: cfg.Metrics, Logger: cfg.Logger, Clock: cfg.Clock, Thresholds: s.Thresholds,
		MassSilence: cfg.MassSilence,
	})
	if err != nil {
		return nil, err
	}
	s.reapers = r
	for _, name := range state.Reapers() {
		s.reaping = append(s.reaping, r.NewService(reaper.ServiceConfig{Name: name, Interval: cfg.SweepInterval, Term: s.currentTerm}))
	}
	return s, nil
}

// defaults fills zero fields and checks bounds; errors name the field.
func (cfg *Config) defaults() error {
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Interval < 10*time.Millisecond || cfg.Interval > time.Minute {
		return fmt.Errorf("scheduler: interval %s: must be between 10ms and 1m", cfg.Interval)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Thresholds == (reaper.Thresholds{}) {
		cfg.Thresholds = reaper.DefaultThresholds()
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = DefaultSweepInterval
	}
	if cfg.SweepInterval < 100*time.Millisecond || cfg.SweepInterval > 10*time.Minute {
		return fmt.Errorf("recovery.sweep-interval: %s must be between 100ms and 10m", cfg.SweepInterval)
	}
	if cfg.ReconcileInterval == 0 {
		cfg.ReconcileInterval = DefaultReconcileInterval
	}
	if cfg.ReconcileInterval < time.Second || cfg.ReconcileInterval > time.Hour {
		return fmt.Errorf("scheduler: reconcile interval %s must be between 1s and 1h", cfg.ReconcileInterval)
	}
	cfg.TickBatch = cmpOr(cfg.TickBatch, DefaultTickBatch)
	cfg.ReconcileBatch = cmpOr(cfg.ReconcileBatch, DefaultReconcileBatch)
	cfg.TickTIs = cmpOr(cfg.TickTIs, store.DefaultPassTIs)
	if cfg.Clock == nil {
		cfg.Clock = reaper.DBClock{Store: cfg.Store}
	}
	return nil
}

func cmpOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// Interval is the configured tick period.
func (s *Scheduler) Interval() time.Duration { return s.cfg.Interval }

// Lead runs the leader's services for one term until ctx is cancelled
// (returns nil) or a write is fenced (returns the *store.FencedError).
// Other errors are logged by the service that met them and retried on its
// next interval, so a database outage pauses the work without ending the
// term; the stall detector restarts the agent-lost grace when the
// database comes back. It has the signature of
// leader.Callbacks.OnStartedLeading.
func (s *Scheduler) Lead(ctx context.Context, term leader.Term) error {
	s.leading.Store(true)
	defer s.leading.Store(false)
	defer s.setGroup(nil, nil)
	defer s.setTerm(nil)
	s.lastTick.Store(time.Now().UnixNano()) // a new term starts fresh for metrics
	s.reapers.ResetBrake()                  // and judges mass silence afresh
	clock := s.cfg.Clock
	if db, ok := clock.(reaper.DBClock); ok {
		cc := db.Store.ClockConn()
		defer cc.Close()
		clock = cc
	}
	stall := newStallDetector(stallConfig{Epoch: term.Epoch, GapLimit: s.gapLimit(), Clock: clock, SetTerm: s.setTerm}, s.log)
	if err := stall.start(ctx); err != nil {
		return nil // ctx cancelled
	}
	group, unsub := s.services(term.Epoch, stall)
	defer unsub()
	s.setGroup(group, stall)
	s.log.Info("leading: scheduler and reapers started", "epoch", term.Epoch,
		"grace_start", s.currentTerm().GraceStart)
	err := group.Run(ctx)
	if store.IsFenced(err) {
		s.cfg.Metrics.FencedWritesRejected.Inc()
		s.log.Error("write fenced: stopping leadership", "err", err)
		return err
	}
	return nil
}

// Service names, for logs and health.
const (
	ServiceTick      = "scheduler_tick"
	ServiceReconcile = "reconcile"
	ServiceStall     = "stall_detector"
	// ServiceSettings, ServiceTICounts, ServiceRetention and
	// ServiceSchedules are named beside their services; each reaper runs
	// as a service named after it (reaper.Names).
)

// services builds one term's services, and a func that drops their
// notification subscriptions.
func (s *Scheduler) services(epoch int64, stall *stallDetector) (*maintenance.Group, func()) {
	var unsubs []func()
	sub := func(channel string) <-chan struct{} {
		ch, unsub := s.subscribe(channel)
		unsubs = append(unsubs, unsub)
		return ch
	}
	svcs := []*maintenance.Service{
		stall.service(),
		maintenance.New(maintenance.Config{Name: ServiceTick, Interval: s.cfg.Interval, Wake: sub(store.ChanScheduler), Coalesce: wakeCoalesce},
			func(ctx context.Context) error { _, err := s.Tick(ctx, epoch); return err }),
		maintenance.New(maintenance.Config{Name: ServiceReconcile, Interval: s.cfg.ReconcileInterval, InitialDelay: s.cfg.ReconcileInterval},
			func(ctx context.Context) error { _, err := s.Reconcile(ctx, epoch); return err }),
		maintenance.New(maintenance.Config{Name: ServiceSchedules, Interval: s.cfg.Interval},
			func(ctx context.Context) error { _, err := s.Schedules(ctx, epoch); return err }),
		s.settings.service(),
		s.tiCounts.service(),
	}
	for _, r := range s.reaping {
		svcs = append(svcs, r.Maintenance(sub(store.ChanReap)))
	}
	if s.retention.enabled() {
		svcs = append(svcs, s.retention.service(epoch))
	}
	if s.cfg.Services != nil {
		svcs = append(svcs, s.cfg.Services(epoch)...)
	}
	return maintenance.NewGroup(s.log, store.IsFenced, svcs...), func() {
		for _, u := range unsubs {
			u()
		}
	}
}

// gapLimit is the longest pause between two stall-detector readings that
// does not restart the grace: beyond it an agent may have missed a
// heartbeat because of us.
func (s *Scheduler) gapLimit() time.Duration {
	return max(s.cfg.HeartbeatInterval, 3*s.cfg.Interval+time.Second)
}

func (s *Scheduler) setTerm(t *reaper.Term) {
	s.mu.Lock()
	s.term = t
	s.mu.Unlock()
}

func (s *Scheduler) currentTerm() *reaper.Term {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.term
}

func (s *Scheduler) setGroup(g *maintenance.Group, d *stallDetector) {
	s.mu.Lock()
	s.group, s.stall = g, d
	s.mu.Unlock()
}

func (s *Scheduler) current() (*maintenance.Group, *stallDetector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.group, s.stall
}

func (s *Scheduler) subscribe(channel string) (<-chan struct{}, func()) {
	if s.cfg.Listener == nil {
		return nil, func() {}
	}
	return s.cfg.Listener.Subscribe(channel)
}

// SweepNow forces one pass of every reaper on this (leading) replica and
// returns what they did (vigil reap). Each runs through its own service,
// so it never overlaps that service's scheduled pass. A forced pass is not
// held by the mass-silence brake (reaper.Term.Force): it is how an
// operator reaps past it. Errors:
// leader.ErrNotLeading on a follower, whose caller should ask the leader instead
// (store.RequestSweep).
func (s *Scheduler) SweepNow(ctx context.Context) (reaper.Report, error) {
	g, _ := s.current()
	if g == nil || s.currentTerm() == nil {
		return reaper.Report{}, leader.ErrNotLeading
	}
	if err := s.RefreshThresholds(ctx); err != nil {
		return reaper.Report{}, err
	}
	all := reaper.Report{Candidates: []reaper.Candidate{}}
	for _, name := range state.Reapers() {
		var rep reaper.Report
		err := g.Service(string(name)).Exclusive(ctx, func(ctx context.Context) error {
			t := s.currentTerm()
			if t == nil {
				return leader.ErrNotLeading
			}
			forced := *t
			forced.Force = true
			var err error
			rep, err = s.reapers.Pass(ctx, name, forced)
			return err
		})
		if store.IsFenced(err) {
			s.cfg.Metrics.FencedWritesRejected.Inc()
			return all, err
		}
		if err != nil {
			return all, err
		}
		all.Candidates = append(all.Candidates, rep.Candidates...)
		all.Errors = append(all.Errors, rep.Errors...)
		for _, n := range rep.Grace {
			all.AddGrace(n)
		}
	}
	return all, nil
}

// DryRun lists every reaper candidate without writing (vigil reap
// --dry-run). On a follower the agent-lost grace is unknown and not
// applied; the report says so.
func (s *Scheduler) DryRun(ctx context.Context) (reaper.Report, error) {
	if err := s.RefreshThresholds(ctx); err != nil {
		return reaper.Report{}, err
	}
	t := s.currentTerm()
	if t == nil {
		rep, err := s.reapers.DryRun(ctx, reaper.Term{})
		rep.Grace = []reaper.GraceNotice{{Reaper: state.ReaperAgentLost,
			Message: "this replica does not lead: candidates are listed without the leader's post-leadership grace"}}
		return rep, err
	}
	return s.reapers.DryRun(ctx, *t)
}

// AtRisk lists the work a reaper will act on if nothing changes, with the
// time left (reaper.Reapers.AtRisk): of every run (runID 0) or of one
// (reaper.Reapers.RunAtRisk). On a follower the leader's grace is
// unknown and the report says so.
func (s *Scheduler) AtRisk(ctx context.Context, runID int64) (reaper.AtRiskReport, error) {
	if err := s.RefreshThresholds(ctx); err != nil {
		return reaper.AtRiskReport{}, err
	}
	if runID != 0 {
		return s.reapers.RunAtRisk(ctx, s.currentTerm(), s.cfg.HeartbeatInterval, runID)
	}
	return s.reapers.AtRisk(ctx, s.currentTerm(), s.cfg.HeartbeatInterval)
}

// Heartbeat reports the scheduler's health (docs/design.md §5, adr/0012): an error
// when the database is unreachable, or, on the leader, when the stall
// detector has had no database clock reading for longer than the gap
// limit, or when a service has been stuck in one pass past its deadline.
// How long a tick or sweep takes is not a health signal.
func (s *Scheduler) Heartbeat(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.cfg.Store.Ping(pctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	g, d := s.current()
	if !s.leading.Load() || g == nil {
		return nil
	}
	if age, limit := d.silence(), s.gapLimit(); age > limit {
		return fmt.Errorf("leader stalled: no database clock reading for %s (limit %s)", age.Round(time.Millisecond), limit)
	}
	if stuck := g.Stuck(time.Now()); len(stuck) > 0 {
		return fmt.Errorf("maintenance service stuck: %s", strings.Join(stuck, "; "))
	}
	return nil
}

// MassSilence is the mass-silence brake's last verdict on this replica's
// current term (docs/scheduler-resilience.md): Engaged while agent-lost
// and dispatch-lost reaping hold. It is the zero reaper.Brake on a
// follower and before the term's first agent-lost or dispatch-lost pass.
func (s *Scheduler) MassSilence() reaper.Brake {
	if !s.leading.Load() {
		return reaper.Brake{}
	}
	return s.reapers.Brake()
}

// Leading reports whether this replica's scheduler is in a term.
func (s *Scheduler) Leading() bool { return s.leading.Load() }

// LastTick is when the last tick finished (zero before the first).
func (s *Scheduler) LastTick() time.Time {
	n := s.lastTick.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

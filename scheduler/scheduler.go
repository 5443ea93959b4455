// Package scheduler is Vigil's leader loop (DESIGN §5): each tick starts
// queued runs, resolves dependencies (with upstream_failed propagation),
// queues scheduled TIs within max_active_tasks, requeues due retries and
// finalizes runs. It ticks on an interval and wakes early on
// LISTEN/NOTIFY when a TI completes or a run is triggered.
//
// The loop holds no state a new leader would need: every decision is read
// from PostgreSQL, so a fresh leader picks up where the last one stopped
// (KiCI startup recovery). Every write is fenced by the term's epoch.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/store"
)

// Defaults (DESIGN §5, §6).
const (
	DefaultInterval          = time.Second
	DefaultSweepInterval     = 10 * time.Second
	DefaultHeartbeatInterval = 15 * time.Second
)

// Config configures a Scheduler. Store and Metrics are required.
type Config struct {
	Store    *store.Store
	Listener *store.Listener // optional: wake on NOTIFY
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
	Interval time.Duration // default DefaultInterval; 10ms..1m
	// Thresholds are the configured reaper thresholds (default
	// reaper.DefaultThresholds); runtime overrides sit on top.
	Thresholds reaper.Thresholds
	// HeartbeatInterval is the agents' heartbeat interval, for the
	// "agent-lost ≥ 2 × heartbeat" rule; default 15s.
	HeartbeatInterval time.Duration
	// SweepInterval is how often the reapers run; default 10s, 100ms..10m.
	SweepInterval time.Duration
	Clock         reaper.Clock // default: the database clock
	Retention     Retention
}

// Scheduler runs the reconcile loop while its replica leads. It is safe for
// concurrent use: Heartbeat may be called from HTTP handlers.
type Scheduler struct {
	cfg      Config
	log      *slog.Logger
	reapers  *reaper.Reapers
	leading  atomic.Bool
	lastTick atomic.Int64 // unix nanoseconds of the last finished tick

	thMu      sync.RWMutex
	effective reaper.Thresholds

	sweepMu sync.Mutex // one sweep at a time: the loop's or a forced one
	termMu  sync.Mutex
	term    *reaper.Term // nil when not leading
}

// New validates cfg and returns a Scheduler. Errors name the field.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Store == nil {
		return nil, errors.New("scheduler: Store is required")
	}
	if cfg.Metrics == nil {
		return nil, errors.New("scheduler: Metrics is required")
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Interval < 10*time.Millisecond || cfg.Interval > time.Minute {
		return nil, fmt.Errorf("scheduler: interval %s: must be between 10ms and 1m", cfg.Interval)
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
		return nil, fmt.Errorf("recovery.sweep-interval: %s must be between 100ms and 10m", cfg.SweepInterval)
	}
	if cfg.Clock == nil {
		cfg.Clock = reaper.DBClock{Store: cfg.Store}
	}
	if err := cfg.Retention.Validate(); err != nil {
		return nil, err
	}
	if err := validateConfigThresholds(cfg); err != nil {
		return nil, err
	}
	s := &Scheduler{cfg: cfg, log: cfg.Logger.With("component", "scheduler"), effective: cfg.Thresholds}
	r, err := reaper.New(reaper.Config{
		Store: cfg.Store, Metrics: cfg.Metrics, Logger: cfg.Logger, Clock: cfg.Clock, Thresholds: s.Thresholds,
	})
	if err != nil {
		return nil, err
	}
	s.reapers = r
	return s, nil
}

// Interval is the configured tick period.
func (s *Scheduler) Interval() time.Duration { return s.cfg.Interval }

// Lead runs ticks for one term until ctx is cancelled (returns nil) or a
// write is fenced (returns the *store.FencedError). Other errors are
// logged and the next tick retries, so a database outage pauses
// scheduling without ending the term; when the database comes back the
// agent-lost grace starts again. It has the signature of
// leader.Callbacks.OnStartedLeading.
func (s *Scheduler) Lead(ctx context.Context, term leader.Term) error {
	s.leading.Store(true)
	defer s.leading.Store(false)
	defer s.setTerm(nil)
	s.lastTick.Store(time.Now().UnixNano()) // a new term starts fresh for Heartbeat
	rt, err := s.startGrace(ctx, term.Epoch)
	if err != nil {
		return nil // ctx cancelled
	}
	s.log.Info("leading: scheduler and reapers started", "epoch", term.Epoch, "grace_start", rt.GraceStart)
	wake, reap, unsub := s.subscribe()
	defer unsub()
	ticker := time.NewTicker(s.cfg.Interval)
	defer ticker.Stop()
	var lastSweep time.Time
	// The first retention pass waits a minute so a restart loop cannot
	// turn into a pruning loop.
	lastPrune := time.Now().Add(time.Minute - s.cfg.Retention.Interval)
	lastOK := rt.GraceStart // database clock of the last successful tick
	dbDown, forced := false, false
	for {
		err := s.Tick(ctx, term.Epoch)
		if err == nil {
			// Before any sweep: if the database was down, or the loop was
			// stalled (a paused database, a stopped process, a laptop
			// asleep), agents could not heartbeat meanwhile, so staleness
			// restarts from now (DESIGN §6 grace).
			rt, err = s.restartGraceAfterGap(ctx, term.Epoch, rt, &lastOK, dbDown)
			if err == nil {
				dbDown = false
			}
		}
		if err == nil && (forced || time.Since(lastSweep) >= s.cfg.SweepInterval) {
			if err = s.RefreshThresholds(ctx); err == nil {
				_, err = s.sweep(ctx, *rt)
				lastSweep, forced = time.Now(), false
			}
		}
		if err == nil && time.Since(lastPrune) >= s.cfg.Retention.Interval {
			_, _, err = s.Prune(ctx, term.Epoch)
			lastPrune = time.Now()
		}
		switch {
		case store.IsFenced(err):
			s.cfg.Metrics.FencedWritesRejected.Inc()
			s.log.Error("write fenced: stopping leadership", "err", err)
			return err
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			dbDown = true
			s.log.Warn("tick failed; retrying next tick", "err", err, "epoch", term.Epoch)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-wake:
		case <-reap:
			forced = true
		}
	}
}

// gapLimit is the longest pause between successful ticks that does not
// restart the grace: beyond it an agent may have missed a heartbeat
// because of us, and it matches Heartbeat()'s staleness bound.
func (s *Scheduler) gapLimit() time.Duration {
	return max(s.cfg.HeartbeatInterval, 3*s.cfg.Interval+time.Second)
}

// restartGraceAfterGap reads the database clock after a successful tick
// and restarts the grace when the previous tick failed (the database was
// unreachable) or was longer ago than gapLimit (a stall without errors).
func (s *Scheduler) restartGraceAfterGap(ctx context.Context, epoch int64, rt *reaper.Term, lastOK *time.Time, dbDown bool) (*reaper.Term, error) {
	now, err := s.cfg.Clock.Now(ctx)
	if err != nil {
		return rt, err
	}
	gap := now.Sub(*lastOK)
	*lastOK = now
	next := &reaper.Term{Epoch: epoch, GraceStart: rt.GraceStart, CheckedAt: now, MaxGap: s.gapLimit()}
	if !dbDown && gap <= s.gapLimit() {
		s.setTerm(next)
		return next, nil
	}
	next.GraceStart = now
	s.setTerm(next)
	s.log.Info("agent-lost grace restarted: agents could not report meanwhile",
		"database_was_unreachable", dbDown, "gap", gap.Round(time.Millisecond), "grace_start", now)
	return next, nil
}

// startGrace reads the clock (retrying while the database is down) and
// records the term with that grace start.
func (s *Scheduler) startGrace(ctx context.Context, epoch int64) (*reaper.Term, error) {
	for {
		now, err := s.cfg.Clock.Now(ctx)
		if err == nil {
			rt := &reaper.Term{Epoch: epoch, GraceStart: now, CheckedAt: now, MaxGap: s.gapLimit()}
			s.setTerm(rt)
			return rt, nil
		}
		s.log.Warn("cannot read the database clock; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(s.cfg.Interval):
		}
	}
}

func (s *Scheduler) setTerm(t *reaper.Term) {
	s.termMu.Lock()
	s.term = t
	s.termMu.Unlock()
}

func (s *Scheduler) currentTerm() *reaper.Term {
	s.termMu.Lock()
	defer s.termMu.Unlock()
	return s.term
}

func (s *Scheduler) subscribe() (wake, reap <-chan struct{}, unsub func()) {
	if s.cfg.Listener == nil {
		return nil, nil, func() {}
	}
	w, u1 := s.cfg.Listener.Subscribe(store.ChanScheduler)
	r, u2 := s.cfg.Listener.Subscribe(store.ChanReap)
	return w, r, func() { u1(); u2() }
}

func (s *Scheduler) sweep(ctx context.Context, term reaper.Term) (protocol.ReapReport, error) {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	return s.reapers.Sweep(ctx, term)
}

// ErrNotLeading is returned by SweepNow on a replica that does not lead.
var ErrNotLeading = errors.New("this replica does not lead")

// SweepNow forces one sweep of every reaper on this (leading) replica and
// returns what it did (vigil reap). Errors: ErrNotLeading on a follower,
// whose caller should ask the leader instead (store.RequestSweep).
func (s *Scheduler) SweepNow(ctx context.Context) (protocol.ReapReport, error) {
	t := s.currentTerm()
	if t == nil {
		return protocol.ReapReport{}, ErrNotLeading
	}
	if err := s.RefreshThresholds(ctx); err != nil {
		return protocol.ReapReport{}, err
	}
	rep, err := s.sweep(ctx, *t)
	if store.IsFenced(err) {
		s.cfg.Metrics.FencedWritesRejected.Inc()
	}
	return rep, err
}

// DryRun lists every reaper candidate without writing (vigil reap
// --dry-run). On a follower the agent-lost grace is unknown and not
// applied; the report says so.
func (s *Scheduler) DryRun(ctx context.Context) (protocol.ReapReport, error) {
	if err := s.RefreshThresholds(ctx); err != nil {
		return protocol.ReapReport{}, err
	}
	t := s.currentTerm()
	if t == nil {
		rep, err := s.reapers.DryRun(ctx, reaper.Term{})
		rep.Grace = "this replica does not lead: candidates are listed without the leader's post-leadership grace"
		return rep, err
	}
	return s.reapers.DryRun(ctx, *t)
}

// Tick runs the steps of DESIGN §5 once under epoch. The first error
// stops the tick (the next one retries).
func (s *Scheduler) Tick(ctx context.Context, epoch int64) error {
	start := time.Now()
	st := s.cfg.Store
	started, err := st.StartQueuedRuns(ctx, epoch)
	if err != nil {
		return err
	}
	upFailed, scheduled, err := st.ResolveDependencies(ctx, epoch)
	if err != nil {
		return err
	}
	retried, err := st.RequeueDueRetries(ctx, epoch)
	if err != nil {
		return err
	}
	queued, err := st.QueueScheduled(ctx, epoch)
	if err != nil {
		return err
	}
	finalized, err := st.FinalizeRuns(ctx, epoch)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	s.cfg.Metrics.TickDuration.Observe(elapsed.Seconds())
	now := time.Now()
	s.lastTick.Store(now.UnixNano())
	s.cfg.Metrics.LastTick.Set(float64(now.UnixNano()) / 1e9)
	if started+upFailed+scheduled+retried+queued+finalized > 0 {
		s.log.Debug("tick", "runs_started", started, "upstream_failed", upFailed, "scheduled", scheduled,
			"retries_due", retried, "queued", queued, "runs_finalized", finalized, "took", elapsed)
	}
	return nil
}

// Heartbeat reports the scheduler's health (DESIGN §5): an error when the
// database is unreachable, or when this replica leads and its last tick
// is older than 3 × interval + 1 s.
func (s *Scheduler) Heartbeat(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.cfg.Store.Ping(pctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	if s.leading.Load() {
		age := time.Since(time.Unix(0, s.lastTick.Load()))
		if limit := 3*s.cfg.Interval + time.Second; age > limit {
			return fmt.Errorf("last scheduler tick %s ago exceeds %s", age.Round(time.Millisecond), limit)
		}
	}
	return nil
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

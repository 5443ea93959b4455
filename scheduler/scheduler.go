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
	"sync/atomic"
	"time"

	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// DefaultInterval is the tick period (DESIGN §5).
const DefaultInterval = time.Second

// Config configures a Scheduler. Store and Metrics are required.
type Config struct {
	Store    *store.Store
	Listener *store.Listener // optional: wake on NOTIFY
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
	Interval time.Duration // default DefaultInterval; 10ms..1m
}

// Scheduler runs the reconcile loop while its replica leads. It is safe for
// concurrent use: Heartbeat may be called from HTTP handlers.
type Scheduler struct {
	cfg      Config
	log      *slog.Logger
	leading  atomic.Bool
	lastTick atomic.Int64 // unix nanoseconds of the last finished tick
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
	return &Scheduler{cfg: cfg, log: cfg.Logger.With("component", "scheduler")}, nil
}

// Interval is the configured tick period.
func (s *Scheduler) Interval() time.Duration { return s.cfg.Interval }

// Lead runs ticks for one term until ctx is cancelled (returns nil) or a
// write is fenced (returns the *store.FencedError). Other errors are
// logged and the next tick retries, so a database outage pauses
// scheduling without ending the term. It has the signature of
// leader.Callbacks.OnStartedLeading.
func (s *Scheduler) Lead(ctx context.Context, term leader.Term) error {
	s.leading.Store(true)
	defer s.leading.Store(false)
	s.lastTick.Store(time.Now().UnixNano()) // a new term starts fresh for Heartbeat
	var wake <-chan struct{}
	if s.cfg.Listener != nil {
		ch, unsub := s.cfg.Listener.Subscribe(store.ChanScheduler)
		defer unsub()
		wake = ch
	}
	ticker := time.NewTicker(s.cfg.Interval)
	defer ticker.Stop()
	for {
		if err := s.Tick(ctx, term.Epoch); err != nil {
			if store.IsFenced(err) {
				s.cfg.Metrics.FencedWritesRejected.Inc()
				s.log.Error("write fenced: stopping leadership", "err", err)
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
			s.log.Warn("tick failed; retrying next tick", "err", err, "epoch", term.Epoch)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-wake:
		}
	}
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

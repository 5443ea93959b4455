// Package maintenance runs the leader's background work as small,
// independent services: the scheduler tick, each reaper, the reconcile
// safety net, retention and the stall detector each own a goroutine, an
// interval and a per-pass deadline (adr/0012-maintenance-services.md).
// A slow service delays only itself.
//
// A Group is started when a term of leadership begins and stopped when it
// ends; Stop waits until every pass has returned, so no work of an old
// term overlaps the next. Work that does not need leadership (each
// replica's cluster row, the fence watch) runs under the same runner in a
// group of its own. The package knows nothing of Vigil's schema: a
// service is a name, a timing and a Pass.
package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Pass is one round of a service's work, bounded by the ctx deadline of
// Config.Timeout. An error is logged and the next interval retries,
// unless the Group's fatal predicate reports it, which ends the Group, or
// it is ErrFinished, which ends this service alone.
type Pass func(ctx context.Context) error

// ErrFinished is returned (or wrapped) by a Pass whose service has nothing
// left to do: its loop ends without error and the Group's other services
// go on. The fence watch uses it once the fence no longer blocks.
var ErrFinished = errors.New("maintenance: service finished")

// Config is one service's timing.
type Config struct {
	// Name labels logs, metrics and health reports.
	Name string
	// Interval is the time from the end of one pass to the start of the
	// next when nothing wakes the service early (stretched by MaxDuty).
	// Required, > 0.
	Interval time.Duration
	// Timeout bounds one pass (its ctx deadline) and is the liveness
	// limit: a pass running longer is reported by Stuck. Default: the
	// larger of 4 × Interval and 30 s.
	Timeout time.Duration
	// Wake, when set, starts a pass early. Sends are hints and may be
	// coalesced: many wakes during a pass cause one more pass, not one each.
	Wake <-chan struct{}
	// Coalesce is how long a woken service waits before its pass, so that
	// a burst of wakes costs one pass. Zero runs at once.
	Coalesce time.Duration
	// InitialDelay postpones the first pass; zero runs it at once.
	InitialDelay time.Duration
	// MaxDuty, when in (0, 1), is the largest share of wall time the
	// service's passes may take: after a pass of d the next starts no
	// sooner than d × (1/MaxDuty − 1), if that is longer than Interval.
	// For work whose cost grows with the data and whose result may lag
	// (a gauge), so that its cost stays a bounded share of a connection
	// and of the database's CPU. Zero (or ≥ 1) keeps Interval alone.
	MaxDuty float64
}

// nextWait is the time from the end of a pass that took took to the
// start of the next: interval, stretched so that passes take at most
// maxDuty of the wall time (see Config.MaxDuty).
func nextWait(interval, took time.Duration, maxDuty float64) time.Duration {
	if maxDuty <= 0 || maxDuty >= 1 {
		return interval
	}
	return max(interval, time.Duration(float64(took)*(1/maxDuty-1)))
}

// Service runs a Pass on its Config's schedule. Its methods are safe for
// concurrent use; Run must be called at most once at a time.
type Service struct {
	cfg  Config
	pass Pass
	mu   sync.Mutex   // held for the duration of a pass: Run's or RunOnce's
	busy atomic.Int64 // unix nanoseconds the current pass began; 0 when idle
}

// New returns a Service. It panics on a programmer error: an empty name or
// a non-positive interval.
func New(cfg Config, pass Pass) *Service {
	if cfg.Name == "" || cfg.Interval <= 0 || pass == nil {
		panic(fmt.Sprintf("maintenance: service %q needs a name, a positive interval and a pass", cfg.Name))
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = max(4*cfg.Interval, 30*time.Second)
	}
	return &Service{cfg: cfg, pass: pass}
}

// Name is the service's name.
func (s *Service) Name() string { return s.cfg.Name }

// RunOnce runs one pass now, after any pass in progress ends, and returns
// its error.
func (s *Service) RunOnce(ctx context.Context) error { return s.Exclusive(ctx, s.pass) }

// Exclusive runs fn in the service's place: after any pass in progress
// ends, under the same deadline, and watched by Stuck like a pass. Forced
// work (vigil reap) uses it so it never overlaps the service's own pass.
func (s *Service) Exclusive(ctx context.Context, fn Pass) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy.Store(time.Now().UnixNano())
	defer s.busy.Store(0)
	pctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return fn(pctx)
}

// Stuck reports how long the current pass has run when that is longer
// than the service's Timeout (a pass that ignores its deadline), else 0.
func (s *Service) Stuck(now time.Time) time.Duration {
	b := s.busy.Load()
	if b == 0 {
		return 0
	}
	if d := now.Sub(time.Unix(0, b)); d > s.cfg.Timeout {
		return d
	}
	return 0
}

// Run loops until ctx ends or a pass returns ErrFinished (it returns nil),
// or a pass returns an error that fatal reports (it returns that error).
// Other errors are logged.
func (s *Service) Run(ctx context.Context, fatal func(error) bool, log *slog.Logger) error {
	timer := time.NewTimer(s.cfg.InitialDelay)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-s.cfg.Wake:
			if s.cfg.Coalesce > 0 && !sleep(ctx, s.cfg.Coalesce) {
				return nil
			}
		}
		began := time.Now()
		err := s.RunOnce(ctx)
		took := time.Since(began)
		switch {
		case err == nil:
		case ctx.Err() != nil, errors.Is(err, ErrFinished):
			return nil
		case fatal != nil && fatal(err):
			return err
		default:
			log.Warn("maintenance pass failed; the next interval retries", "service", s.cfg.Name, "err", err)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(nextWait(s.cfg.Interval, took, s.cfg.MaxDuty))
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Group runs services side by side for one term of leadership.
type Group struct {
	services []*Service
	log      *slog.Logger
	fatal    func(error) bool
}

// NewGroup returns a Group of services. fatal classifies errors that end
// the whole Group (a fenced write); log may be nil.
func NewGroup(log *slog.Logger, fatal func(error) bool, services ...*Service) *Group {
	if log == nil {
		log = slog.Default()
	}
	return &Group{services: services, log: log, fatal: fatal}
}

// Run starts every service in its own goroutine and blocks until ctx ends
// or one service returns a fatal error; either way it cancels the rest and
// waits for every pass to return before it returns (nil, or the first
// fatal error).
func (g *Group) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(g.services))
	for _, s := range g.services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(ctx, g.fatal, g.log); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when no service failed fatally
}

// Stuck names every service whose current pass has outlived its Timeout,
// with how long it has run, sorted by name.
func (g *Group) Stuck(now time.Time) []string {
	var out []string
	for _, s := range g.services {
		if d := s.Stuck(now); d > 0 {
			out = append(out, fmt.Sprintf("%s (in one pass for %s, limit %s)", s.cfg.Name, d.Round(time.Millisecond), s.cfg.Timeout))
		}
	}
	sort.Strings(out)
	return out
}

// Service returns the service called name, or nil.
func (g *Group) Service(name string) *Service {
	for _, s := range g.services {
		if s.cfg.Name == name {
			return s
		}
	}
	return nil
}

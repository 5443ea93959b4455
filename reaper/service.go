package reaper

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vigil-sched/vigil/maintenance"
	"github.com/vigil-sched/vigil/state"
)

// DefaultSweepInterval is each reaper service's interval when its
// ServiceConfig leaves it zero (recovery.sweep-interval).
const DefaultSweepInterval = 10 * time.Second

// ServiceConfig configures one reaper's service.
type ServiceConfig struct {
	// Name is the reaper the service runs, one of state.Reapers(); it also
	// names the service in logs and health.
	Name state.Reaper
	// Interval is the time between passes when no reap request wakes the
	// service; default DefaultSweepInterval.
	Interval time.Duration
	// Term returns the leader's current term, or nil while there is none
	// (the service then does nothing). Required.
	Term func() *Term
}

// Service runs one reaper on its own interval while the replica leads;
// the leader starts one per name in state.Reapers(). It holds nothing between
// passes: the reaper's last sweep and brake verdict live in Reapers.
type Service struct {
	cfg     ServiceConfig
	reapers *Reapers
}

// NewService returns the service that runs the reaper cfg.Name. It
// panics on a programmer error: an unknown name, a negative interval or a
// nil Term.
func (r *Reapers) NewService(cfg ServiceConfig) *Service {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultSweepInterval)
	if !slices.Contains(state.Reapers(), cfg.Name) || cfg.Interval < 0 || cfg.Term == nil {
		panic(fmt.Sprintf("reaper: service %q needs a known reaper name, a positive interval and a Term", cfg.Name))
	}
	return &Service{cfg: cfg, reapers: r}
}

// Maintenance returns the maintenance service that runs runOnce every
// Interval, and early on each wake (a reap request, store.ChanReap).
func (s *Service) Maintenance(wake <-chan struct{}) *maintenance.Service {
	return maintenance.New(maintenance.Config{Name: string(s.cfg.Name), Interval: s.cfg.Interval, Wake: wake}, s.runOnce)
}

// runOnce runs the reaper once for the current term (Reapers.Pass); it
// does nothing while there is no term. A fenced write returns the
// *store.FencedError.
func (s *Service) runOnce(ctx context.Context) error {
	t := s.cfg.Term()
	if t == nil {
		return nil
	}
	_, err := s.reapers.Pass(ctx, s.cfg.Name, *t)
	return err
}

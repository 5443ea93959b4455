package notify

import (
	"context"
	"log/slog"

	"github.com/vigil-sched/vigil/maintenance"
)

// slaBatch bounds the runs one fenced statement of the sla service
// stamps.
const slaBatch = 100

// SLA is the leader's sla service: it finds live runs past their SLA
// deadline (runs.sla_at, by the database clock, through runs_sla_idx, so
// a pass with nothing due reads no run) and raises sla_missed once for
// each: the run's event, vigil_sla_missed_total and the notification,
// in one fenced statement per batch (store.MissSLAs).
type SLA struct {
	cfg Config
	log *slog.Logger
}

// NewSLA returns the service for a validated cfg (Config.Validate).
func NewSLA(cfg Config) *SLA { return &SLA{cfg: cfg, log: cfg.Logger.With("component", "sla")} }

// Service runs RunOnce under epoch every SLAInterval.
func (s *SLA) Service(epoch int64) *maintenance.Service {
	return maintenance.New(maintenance.Config{Name: ServiceSLA, Interval: s.cfg.SLAInterval},
		func(ctx context.Context) error { _, err := s.RunOnce(ctx, epoch); return err })
}

// RunOnce raises every due miss, batch after batch, and returns how many
// runs missed their SLA. A fenced epoch returns the *store.FencedError.
func (s *SLA) RunOnce(ctx context.Context, epoch int64) (int, error) {
	total := 0
	for ctx.Err() == nil {
		misses, err := s.cfg.Store.MissSLAs(ctx, epoch, slaBatch)
		if err != nil {
			return total, err
		}
		total += len(misses)
		s.cfg.Metrics.Notify.SLAMisses.Add(float64(len(misses)))
		for _, m := range misses {
			s.log.Info("scheduler decision", "decision", "sla_missed", "run_id", m.RunID,
				"dag_id", m.DAGID, "sla_at", m.SLAAt, "epoch", epoch)
		}
		if len(misses) < slaBatch {
			break
		}
	}
	return total, ctx.Err()
}

// Services returns the delivery and sla services of one term, for the
// scheduler to start and stop with it.
func Services(cfg Config) func(epoch int64) []*maintenance.Service {
	d, s := NewDeliverer(cfg), NewSLA(cfg)
	return func(epoch int64) []*maintenance.Service {
		return []*maintenance.Service{d.Service(epoch), s.Service(epoch)}
	}
}

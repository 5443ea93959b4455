package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/maintenance"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// ServiceTICounts names the leader service that sets vigil_task_instances.
const ServiceTICounts = "ti_counts"

// TICountsMaxDuty is the most of the wall time the ti_counts service may
// spend counting (maintenance.Config.MaxDuty). The count reads up to
// metrics.TaskInstancesCap live TIs and, while heartbeats churn their
// pages, the heap behind each (about 0.34 s at 100k running TIs in
// docs/performance.md); so the gauge lags by up to twenty times its
// cost rather than taking a growing share of the database.
const TICountsMaxDuty = 0.05

// tiCountsConfig is the ti_counts service's timing.
type tiCountsConfig struct {
	// Interval is the time between counts while a count is cheap;
	// default DefaultSweepInterval.
	Interval time.Duration
	// MaxDuty stretches Interval after a slow count; default
	// TICountsMaxDuty, in (0, 1).
	MaxDuty float64
}

// tiCounts is the leader service that sets the vigil_task_instances
// gauge. It holds nothing between passes.
type tiCounts struct {
	cfg     tiCountsConfig
	store   *store.Store
	metrics *metrics.Metrics
}

// newTICounts fills cfg's zero fields with the defaults; it panics on a
// programmer error (a MaxDuty outside (0, 1)).
func newTICounts(cfg tiCountsConfig, st *store.Store, m *metrics.Metrics) *tiCounts {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultSweepInterval)
	cfg.MaxDuty = cmp.Or(cfg.MaxDuty, TICountsMaxDuty)
	if cfg.Interval < 0 || cfg.MaxDuty <= 0 || cfg.MaxDuty >= 1 {
		panic(fmt.Sprintf("scheduler: ti_counts needs a positive interval and a duty in (0, 1), got %s and %g", cfg.Interval, cfg.MaxDuty))
	}
	return &tiCounts{cfg: cfg, store: st, metrics: m}
}

// service runs runOnce every Interval, or less often when it is slow.
func (c *tiCounts) service() *maintenance.Service {
	return maintenance.New(maintenance.Config{Name: ServiceTICounts, Interval: c.cfg.Interval, MaxDuty: c.cfg.MaxDuty}, c.runOnce)
}

// runOnce sets the gauge from one read of the live-TI index
// (store.LiveTICounts), at most metrics.TaskInstancesCap entries: its cost
// follows the live work, never the history.
func (c *tiCounts) runOnce(ctx context.Context) error {
	queued, running, err := c.store.LiveTICounts(ctx, metrics.TaskInstancesCap)
	if err != nil {
		return err
	}
	c.metrics.TaskInstances.WithLabelValues("queued").Set(float64(queued))
	c.metrics.TaskInstances.WithLabelValues("running").Set(float64(running))
	return nil
}

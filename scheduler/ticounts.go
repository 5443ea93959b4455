package scheduler

import (
	"context"

	"github.com/vigil-sched/vigil/metrics"
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

// CountTaskInstances sets the vigil_task_instances gauge from one read of
// the live-TI index (store.LiveTICounts), at most metrics.TaskInstancesCap
// entries: its cost follows the live work, never the history. The leader
// runs it every sweep interval, or less often when it is slow
// (TICountsMaxDuty).
func (s *Scheduler) CountTaskInstances(ctx context.Context) error {
	queued, running, err := s.cfg.Store.LiveTICounts(ctx, metrics.TaskInstancesCap)
	if err != nil {
		return err
	}
	s.cfg.Metrics.TaskInstances.WithLabelValues("queued").Set(float64(queued))
	s.cfg.Metrics.TaskInstances.WithLabelValues("running").Set(float64(running))
	return nil
}

package scheduler

import (
	"context"

	"github.com/vigil-sched/vigil/metrics"
)

// ServiceTICounts names the leader service that sets vigil_task_instances.
const ServiceTICounts = "ti_counts"

// CountTaskInstances sets the vigil_task_instances gauge from one read of
// the live-TI index (store.LiveTICounts), at most metrics.TaskInstancesCap
// entries: its cost follows the live work, never the history. The leader
// runs it every sweep interval.
func (s *Scheduler) CountTaskInstances(ctx context.Context) error {
	queued, running, err := s.cfg.Store.LiveTICounts(ctx, metrics.TaskInstancesCap)
	if err != nil {
		return err
	}
	s.cfg.Metrics.TaskInstances.WithLabelValues("queued").Set(float64(queued))
	s.cfg.Metrics.TaskInstances.WithLabelValues("running").Set(float64(running))
	return nil
}

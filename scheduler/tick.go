package scheduler

import (
	"context"
	"time"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// Tick runs incremental scheduling passes under epoch until the dirty
// queue is drained (each pass in its own fenced transaction, bounded by
// the pacer: TickBatch runs and TickTIs TIs at most), then retries one
// stuck run on its own (see pacer), and returns what they did together. An idle tick is two index reads, whatever the history or
// number of live runs.
func (s *Scheduler) Tick(ctx context.Context, epoch int64) (store.TickResult, error) {
	start := time.Now()
	if f := s.cfg.TestSignals.TickStarted; f != nil {
		f(ctx)
	}
	var total store.TickResult
	for first := true; ; first = false {
		res, err := s.cfg.Store.SchedulePass(ctx, epoch, s.pace.limit(&s.cfg))
		total.Add(res)
		if err != nil {
			s.passFailed(epoch, first, err)
			return total, err
		}
		s.pace.committed(&s.cfg)
		if !res.More || ctx.Err() != nil {
			break
		}
	}
	res, err := s.retryStuck(ctx, epoch)
	total.Add(res)
	if err != nil {
		return total, err
	}
	elapsed := time.Since(start)
	s.cfg.Metrics.TickDuration.Observe(elapsed.Seconds())
	now := time.Now()
	s.lastTick.Store(now.UnixNano())
	s.cfg.Metrics.LastTick.Set(float64(now.UnixNano()) / 1e9)
	if total.Moved() > 0 {
		s.log.Debug("tick", "runs", total.Runs, "runs_started", total.Started, "resolved", total.Resolved,
			"scheduled", total.Scheduled, "retries_due", total.Retried, "queued", total.Queued,
			"runs_finalized", total.Finalized, "runs_idle", total.Idle, "took", elapsed)
	}
	return total, nil
}

// Reconcile is the safety net behind the incremental tick: it runs the
// same per-run steps over every live run, in keyset batches of
// ReconcileBatch, each its own fenced transaction. Whatever it moves, the
// incremental path missed; that is counted as decision reconcile_repaired
// (one per run it looked at in a batch that moved something) and logged
// as a warning.
func (s *Scheduler) Reconcile(ctx context.Context, epoch int64) (store.TickResult, error) {
	var total store.TickResult
	var after int64
	for {
		res, last, err := s.cfg.Store.ReconcileRuns(ctx, epoch, after,
			store.PassLimit{Runs: s.cfg.ReconcileBatch, TIs: s.cfg.TickTIs})
		if res.Moved() > 0 {
			s.cfg.Metrics.Decisions.WithLabelValues(metrics.DecisionReconcileRepaired).Add(float64(res.Moved()))
			s.log.Warn("reconcile repaired what the incremental scheduler missed", "decision", metrics.DecisionReconcileRepaired,
				"epoch", epoch, "runs", res.Runs, "runs_started", res.Started, "resolved", res.Resolved,
				"scheduled", res.Scheduled, "queued", res.Queued, "runs_finalized", res.Finalized, "runs_idle", res.Idle)
		}
		total.Add(res)
		if err != nil || last == 0 {
			return total, err
		}
		after = last
	}
}

package scheduler

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// pacer sizes the tick's passes (adr/0011-incremental-scheduler.md,
// "Amendment: passes bounded by TIs"): each takes at most runs dirty runs
// and TickTIs non-terminal TIs. A tick's first pass that runs out of time
// halves runs (down to one), so the next attempt is smaller instead of the
// same batch failing forever; each pass that commits doubles it back
// towards TickBatch. A run that alone runs out of time is stuck: the
// tick's passes skip it, and it is retried on its own once the others are
// done, so it cannot block the runs behind it.
type pacer struct {
	mu    sync.Mutex
	runs  int     // current run cap; 0 until first used (then TickBatch)
	stuck []int64 // runs that alone ran out of time, oldest first
}

// limit is the bound of the tick's next regular pass.
func (p *pacer) limit(cfg *Config) store.PassLimit {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runs == 0 {
		p.runs = cfg.TickBatch
	}
	return store.PassLimit{Runs: p.runs, TIs: cfg.TickTIs, Skip: slices.Clone(p.stuck)}
}

// committed records a regular pass that committed: the cap doubles back.
func (p *pacer) committed(cfg *Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs = min(max(p.runs*2, 1), cfg.TickBatch)
}

// timedOut records a pass over runIDs that ran out of time and reports
// whether it was a single run, now stuck.
func (p *pacer) timedOut(runIDs []int64) (alone bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs = max(len(runIDs)/2, 1)
	if len(runIDs) != 1 {
		return false
	}
	if !slices.Contains(p.stuck, runIDs[0]) {
		p.stuck = append(p.stuck, runIDs[0])
	}
	return true
}

// nextStuck returns the stuck run to retry, rotating the list so that
// every stuck run gets its turn; ok is false when none is stuck.
func (p *pacer) nextStuck() (id int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.stuck) == 0 {
		return 0, false
	}
	id = p.stuck[0]
	p.stuck = append(p.stuck[1:], id)
	return id, true
}

// unstuck forgets a stuck run whose own pass committed.
func (p *pacer) unstuck(id int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stuck = slices.DeleteFunc(p.stuck, func(x int64) bool { return x == id })
}

// retryStuck runs one stuck run's pass on its own after the tick's regular
// passes, with what is left of the tick's deadline; the run leaves the
// stuck list when that pass commits. Its failure leaves the run cap alone.
func (s *Scheduler) retryStuck(ctx context.Context, epoch int64) (store.TickResult, error) {
	if ctx.Err() != nil {
		return store.TickResult{}, nil
	}
	id, ok := s.pace.nextStuck()
	if !ok {
		return store.TickResult{}, nil
	}
	res, err := s.cfg.Store.SchedulePass(ctx, epoch, store.PassLimit{Runs: 1, Only: []int64{id}})
	if err != nil {
		if store.IsPassTimeout(err) {
			s.cfg.Metrics.Decisions.WithLabelValues(metrics.DecisionTickPassTimeout).Inc()
			s.log.Error("a stuck run's scheduling pass ran out of time again", "decision", metrics.DecisionTickPassTimeout,
				"epoch", epoch, "run_id", id, "err", err)
		}
		return res, err
	}
	s.pace.unstuck(id)
	s.log.Info("a stuck run's scheduling pass committed", "epoch", epoch, "run_id", id)
	return res, nil
}

// passFailed reacts to a failed pass. When it had the tick's whole
// deadline (first) and ran out of time, the next is smaller, the decision
// is counted, and a run that alone cannot finish is logged as an error and
// set aside. A later regular pass that times out only means the tick as a
// whole ran long: the passes before it committed.
func (s *Scheduler) passFailed(epoch int64, first bool, err error) {
	var pe *store.PassError
	if !first || !store.IsPassTimeout(err) || !errors.As(err, &pe) {
		return
	}
	s.cfg.Metrics.Decisions.WithLabelValues(metrics.DecisionTickPassTimeout).Inc()
	if s.pace.timedOut(pe.RunIDs) {
		s.log.Error("a single run's scheduling pass ran out of time; it is retried on its own after the other runs",
			"decision", metrics.DecisionTickPassTimeout, "epoch", epoch, "run_id", pe.RunIDs[0], "err", err)
		return
	}
	s.log.Warn("scheduling pass ran out of time; the next takes half the runs",
		"decision", metrics.DecisionTickPassTimeout, "epoch", epoch, "runs", len(pe.RunIDs),
		"next_runs", max(len(pe.RunIDs)/2, 1), "err", err)
}

package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/metrics"
)

// Retention configures leader-only pruning (docs/design.md §7; horsies retention).
// A zero age disables that category; the CLI's defaults are
// DefaultRetentionRuns and DefaultRetentionAgents.
type Retention struct {
	Runs     time.Duration // terminal runs with their TIs, events and logs
	Agents   time.Duration // inactive or deregistered agents
	Interval time.Duration // how often to prune; default 1h
	Batch    int           // rows per fenced DELETE; default 500
}

// Retention defaults.
const (
	DefaultRetentionRuns     = 30 * 24 * time.Hour
	DefaultRetentionAgents   = 7 * 24 * time.Hour
	DefaultRetentionInterval = time.Hour
	// defaultRetentionBatch is small because a run's TIs, events and logs
	// go with it in the same DELETE: each batch holds its locks briefly.
	defaultRetentionBatch = 100
)

// Prune runs one retention pass under epoch and returns how many runs and
// agents it removed. Each removed row counts decision retention_pruned.
func (s *Scheduler) Prune(ctx context.Context, epoch int64) (runs, agents int, err error) {
	r := s.cfg.Retention
	if r.Runs > 0 {
		if runs, err = s.pruneLoop(ctx, func() (int, error) { return s.cfg.Store.PruneRuns(ctx, epoch, r.Runs, r.Batch) }); err != nil {
			return runs, 0, err
		}
	}
	if r.Agents > 0 {
		if agents, err = s.pruneLoop(ctx, func() (int, error) { return s.cfg.Store.PruneAgents(ctx, epoch, r.Agents, r.Batch) }); err != nil {
			return runs, agents, err
		}
	}
	if runs+agents > 0 {
		s.cfg.Metrics.Decisions.WithLabelValues(metrics.DecisionRetentionPruned).Add(float64(runs + agents))
		s.log.Info("scheduler decision", "decision", metrics.DecisionRetentionPruned, "runs", runs, "agents", agents,
			"epoch", epoch, "runs_older_than", r.Runs, "agents_older_than", r.Agents)
	}
	return runs, agents, nil
}

// pruneLoop deletes batch after batch until one comes back short: a pass
// has no ceiling, so retention keeps up with any completion rate, while
// each batch is its own short transaction.
func (s *Scheduler) pruneLoop(ctx context.Context, batch func() (int, error)) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, err := batch()
		total += n
		if err != nil || n < s.cfg.Retention.Batch {
			return total, err
		}
	}
	return total, ctx.Err()
}

// Validate applies defaults for unset fields and checks bounds; errors
// name the flag (retention-runs, retention-agents, retention-interval).
func (r *Retention) Validate() error {
	if r.Interval == 0 {
		r.Interval = DefaultRetentionInterval
	}
	if r.Batch == 0 {
		r.Batch = defaultRetentionBatch
	}
	switch {
	case r.Runs < 0:
		return fmt.Errorf("retention-runs: %s must not be negative (0 disables)", r.Runs)
	case r.Agents < 0:
		return fmt.Errorf("retention-agents: %s must not be negative (0 disables)", r.Agents)
	case r.Runs > 0 && r.Runs < time.Hour:
		return fmt.Errorf("retention-runs: %s is below the 1h minimum (0 disables)", r.Runs)
	case r.Agents > 0 && r.Agents < time.Hour:
		return fmt.Errorf("retention-agents: %s is below the 1h minimum (0 disables)", r.Agents)
	case r.Interval < time.Minute || r.Interval > 24*time.Hour:
		return fmt.Errorf("retention-interval: %s must be between 1m and 24h", r.Interval)
	case r.Batch < 1 || r.Batch > 100000:
		return fmt.Errorf("retention batch: %d must be between 1 and 100000", r.Batch)
	}
	return nil
}

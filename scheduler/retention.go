package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/vigil-sched/vigil/maintenance"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// ServiceRetention names the leader service that prunes old runs and agents.
const ServiceRetention = "retention"

// Retention configures leader-only pruning (docs/design.md §7; horsies retention).
// A zero age disables that category; the CLI's defaults are
// DefaultRetentionRuns, DefaultRetentionAgents and
// DefaultRetentionNotifications.
type Retention struct {
	Runs   time.Duration // terminal runs with their TIs, events and logs
	Agents time.Duration // inactive or deregistered agents
	Audit  time.Duration // audit log rows (store.PruneAudit)
	// Notifications: delivered or dead notifications, by when they
	// finished (docs/notifications.md).
	Notifications time.Duration
	Interval      time.Duration // how often to prune; default DefaultRetentionInterval
	Batch         int           // rows per fenced DELETE; default defaultRetentionBatch
}

// Retention defaults.
const (
	DefaultRetentionRuns   = 30 * 24 * time.Hour
	DefaultRetentionAgents = 7 * 24 * time.Hour
	// DefaultRetentionNotifications keeps finished notifications as long
	// as runs, so a run's deliveries outlive it no longer than it does.
	DefaultRetentionNotifications = DefaultRetentionRuns
	// DefaultRetentionAudit keeps the audit log 400 days: a year of
	// history and a margin for a yearly review.
	DefaultRetentionAudit    = 400 * 24 * time.Hour
	DefaultRetentionInterval = time.Hour
	// defaultRetentionBatch is small because a run's TIs, events and logs
	// go with it in the same DELETE: each batch holds its locks briefly.
	defaultRetentionBatch = 100
)

// Validate applies defaults for unset fields and checks bounds; errors
// name the flag (retention-runs, retention-agents, retention-interval).
func (r *Retention) Validate() error {
	r.Interval = cmp.Or(r.Interval, DefaultRetentionInterval)
	r.Batch = cmp.Or(r.Batch, defaultRetentionBatch)
	switch {
	case r.Runs < 0:
		return fmt.Errorf("retention-runs: %s must not be negative (0 disables)", r.Runs)
	case r.Agents < 0:
		return fmt.Errorf("retention-agents: %s must not be negative (0 disables)", r.Agents)
	case r.Runs > 0 && r.Runs < time.Hour:
		return fmt.Errorf("retention-runs: %s is below the 1h minimum (0 disables)", r.Runs)
	case r.Agents > 0 && r.Agents < time.Hour:
		return fmt.Errorf("retention-agents: %s is below the 1h minimum (0 disables)", r.Agents)
	case r.Notifications < 0 || (r.Notifications > 0 && r.Notifications < time.Hour):
		return fmt.Errorf("retention-notifications: %s must be 0 (disables) or at least 1h", r.Notifications)
	case r.Audit < 0:
		return fmt.Errorf("retention-audit: %s must not be negative (0 disables)", r.Audit)
	case r.Audit > 0 && r.Audit < time.Hour:
		return fmt.Errorf("retention-audit: %s is below the 1h minimum (0 disables)", r.Audit)
	case r.Interval < time.Minute || r.Interval > 24*time.Hour:
		return fmt.Errorf("retention-interval: %s must be between 1m and 24h", r.Interval)
	case r.Batch < 1 || r.Batch > 100000:
		return fmt.Errorf("retention batch: %d must be between 1 and 100000", r.Batch)
	}
	return nil
}

// retention is the leader service that prunes what Retention names. It
// holds nothing between passes.
type retention struct {
	cfg     Retention // validated
	store   *store.Store
	metrics *metrics.Metrics
	log     *slog.Logger
}

// newRetention returns the service for a validated cfg (Retention.Validate).
func newRetention(cfg Retention, st *store.Store, m *metrics.Metrics, log *slog.Logger) *retention {
	return &retention{cfg: cfg, store: st, metrics: m, log: log}
}

// enabled reports whether any category is kept for a limited time.
func (r *retention) enabled() bool {
	return r.cfg.Runs > 0 || r.cfg.Agents > 0 || r.cfg.Notifications > 0 || r.cfg.Audit > 0
}

// service runs runOnce under epoch every Interval. The first pass waits
// a minute (or one Interval, if shorter) so that a restart loop cannot
// turn into a pruning loop.
func (r *retention) service(epoch int64) *maintenance.Service {
	return maintenance.New(maintenance.Config{Name: ServiceRetention, Interval: r.cfg.Interval,
		Timeout: r.cfg.Interval, InitialDelay: min(time.Minute, r.cfg.Interval)},
		func(ctx context.Context) error { _, _, err := r.runOnce(ctx, epoch); return err })
}

// runOnce prunes under epoch and returns how many runs and agents it
// removed; it prunes the audit log too (logged, not returned). Each
// removed run or agent counts decision retention_pruned. A fenced epoch
// returns the *store.FencedError.
func (r *retention) runOnce(ctx context.Context, epoch int64) (runs, agents int, err error) {
	c := r.cfg
	if c.Runs > 0 {
		if runs, err = r.batches(ctx, func() (int, error) { return r.store.PruneRuns(ctx, epoch, c.Runs, c.Batch) }); err != nil {
			return runs, 0, err
		}
	}
	if c.Agents > 0 {
		if agents, err = r.batches(ctx, func() (int, error) { return r.store.PruneAgents(ctx, epoch, c.Agents, c.Batch) }); err != nil {
			return runs, agents, err
		}
	}
	// Rows that are only history: counted in the log, not as decisions.
	for _, h := range []struct {
		what  string
		age   time.Duration
		prune func(context.Context, int64, time.Duration, int) (int, error)
	}{
		{"audit log", c.Audit, r.store.PruneAudit},
		{"notifications", c.Notifications, r.store.PruneNotifications},
	} {
		if h.age <= 0 {
			continue
		}
		n, err := r.batches(ctx, func() (int, error) { return h.prune(ctx, epoch, h.age, c.Batch) })
		if n > 0 {
			r.log.Info(h.what+" pruned", "rows", n, "older_than", h.age, "epoch", epoch)
		}
		if err != nil {
			return runs, agents, err
		}
	}
	if runs+agents > 0 {
		r.metrics.Decisions.WithLabelValues(metrics.DecisionRetentionPruned).Add(float64(runs + agents))
		r.log.Info("scheduler decision", "decision", metrics.DecisionRetentionPruned, "runs", runs, "agents", agents,
			"epoch", epoch, "runs_older_than", c.Runs, "agents_older_than", c.Agents)
	}
	return runs, agents, nil
}

// batches deletes batch after batch until one comes back short: a pass
// has no ceiling, so retention keeps up with any completion rate, while
// each batch is its own short transaction.
func (r *retention) batches(ctx context.Context, batch func() (int, error)) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, err := batch()
		total += n
		if err != nil || n < r.cfg.Batch {
			return total, err
		}
	}
	return total, ctx.Err()
}

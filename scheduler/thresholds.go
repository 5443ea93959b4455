package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vigil-sched/vigil/maintenance"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/store"
)

// ServiceSettings names the leader service that re-reads the runtime
// threshold overrides.
const ServiceSettings = "settings"

// Setting names under which runtime threshold overrides are stored; they
// are shared by every replica through the settings table.
const (
	settingAgentLost    = "threshold.agent_lost"
	settingDispatchLost = "threshold.dispatch_lost"
	settingOrphan       = "threshold.orphan"
)

// settingsConfig configures the thresholds in force.
type settingsConfig struct {
	// Configured are the thresholds from flags or the config file, valid
	// for Timing; the overrides sit on top of them.
	Configured reaper.Thresholds
	// Timing is what every set of thresholds is checked against.
	Timing reaper.Timing
	// Interval is how often the leader re-reads the overrides; default
	// DefaultSweepInterval.
	Interval time.Duration
}

// settings holds the reaper thresholds in force on this replica: the
// runtime overrides of the settings table over the configured values. Its
// service (leader only) re-reads the overrides, so that a change made
// through any replica reaches the leader's reapers; every replica also
// re-reads them before answering about them. Safe for concurrent use.
type settings struct {
	cfg   settingsConfig
	store *store.Store
	log   *slog.Logger

	mu        sync.RWMutex
	effective reaper.Thresholds
}

func newSettings(cfg settingsConfig, st *store.Store, log *slog.Logger) *settings {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultSweepInterval)
	return &settings{cfg: cfg, store: st, log: log, effective: cfg.Configured}
}

// service runs runOnce every Interval.
func (t *settings) service() *maintenance.Service {
	return maintenance.New(maintenance.Config{Name: ServiceSettings, Interval: t.cfg.Interval}, t.runOnce)
}

// get returns the thresholds in force.
func (t *settings) get() reaper.Thresholds {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.effective
}

// update validates the resulting set as a whole, persists the given
// values (nil = unchanged) in one transaction and applies them here.
// Errors name the field and the rule; nothing is changed on error.
func (t *settings) update(ctx context.Context, agentLost, dispatchLost, orphan *time.Duration) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	next := t.effective
	kv := map[string]string{}
	if agentLost != nil {
		next.AgentLost, kv[settingAgentLost] = *agentLost, agentLost.String()
	}
	if dispatchLost != nil {
		next.DispatchLost, kv[settingDispatchLost] = *dispatchLost, dispatchLost.String()
	}
	if orphan != nil {
		next.Orphan, kv[settingOrphan] = *orphan, orphan.String()
	}
	if err := next.ValidateTiming(t.cfg.Timing); err != nil {
		return err
	}
	if err := t.store.PutSettings(ctx, kv); err != nil {
		return err
	}
	t.effective = next
	return nil
}

// reset drops the overrides, returning to the configured values.
func (t *settings) reset(ctx context.Context) error {
	if err := t.store.DeleteSettings(ctx, settingAgentLost, settingDispatchLost, settingOrphan); err != nil {
		return err
	}
	return t.runOnce(ctx)
}

// runOnce re-reads the overrides from the database. An override that no
// longer validates (e.g. the heartbeat interval grew) is ignored with a
// warning, keeping the configured value.
func (t *settings) runOnce(ctx context.Context) error {
	kv, err := t.store.Settings(ctx)
	if err != nil {
		return err
	}
	next := t.cfg.Configured
	for name, dst := range map[string]*time.Duration{
		settingAgentLost: &next.AgentLost, settingDispatchLost: &next.DispatchLost, settingOrphan: &next.Orphan,
	} {
		if v, ok := kv[name]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.log.Warn("ignoring malformed threshold override", "setting", name, "value", v, "err", err)
				continue
			}
			*dst = d
		}
	}
	if err := next.ValidateTiming(t.cfg.Timing); err != nil {
		t.log.Warn("ignoring threshold overrides that do not validate", "err", err)
		next = t.cfg.Configured
	}
	t.mu.Lock()
	t.effective = next
	t.mu.Unlock()
	return nil
}

// Thresholds returns the effective reaper thresholds: runtime overrides
// (set through this API on any replica) over the configured values.
func (s *Scheduler) Thresholds() reaper.Thresholds { return s.settings.get() }

// SetAgentLostThreshold changes the agent-lost threshold at runtime, for
// every replica, after validation (≥ 2 × heartbeat interval, 1s..2h, and
// in Pro above the failover minimum of reaper.Thresholds.ValidateTiming).
// Safe to call at any time (docs/design.md §5 tuning API).
func (s *Scheduler) SetAgentLostThreshold(ctx context.Context, d time.Duration) error {
	return s.UpdateThresholds(ctx, &d, nil, nil)
}

// SetDispatchLostThreshold changes the dispatch-lost threshold (1s..24h).
func (s *Scheduler) SetDispatchLostThreshold(ctx context.Context, d time.Duration) error {
	return s.UpdateThresholds(ctx, nil, &d, nil)
}

// SetOrphanThreshold changes the orphan-run threshold (1s..24h).
func (s *Scheduler) SetOrphanThreshold(ctx context.Context, d time.Duration) error {
	return s.UpdateThresholds(ctx, nil, nil, &d)
}

// UpdateThresholds validates the resulting set as a whole, persists the
// given values (nil = unchanged) in one transaction and applies them here;
// the leader picks them up at its settings service's next pass. Errors
// name the field and the rule; nothing is changed on error.
func (s *Scheduler) UpdateThresholds(ctx context.Context, agentLost, dispatchLost, orphan *time.Duration) error {
	return s.settings.update(ctx, agentLost, dispatchLost, orphan)
}

// ResetThresholds drops the runtime overrides, returning to the
// configured values.
func (s *Scheduler) ResetThresholds(ctx context.Context) error { return s.settings.reset(ctx) }

// RefreshThresholds re-reads the overrides from the database. An override
// that no longer validates (e.g. the heartbeat interval grew) is ignored
// with a warning, keeping the configured value.
func (s *Scheduler) RefreshThresholds(ctx context.Context) error { return s.settings.runOnce(ctx) }

func validateConfigThresholds(cfg Config) error {
	if err := cfg.Thresholds.ValidateTiming(cfg.timing()); err != nil {
		return fmt.Errorf("recovery thresholds: %w", err)
	}
	return nil
}

// timing is what reaper.Thresholds.ValidateTiming checks the thresholds
// against: the heartbeat interval and, in Pro, the election TTL.
func (c Config) timing() reaper.Timing {
	return reaper.Timing{HeartbeatInterval: c.HeartbeatInterval, ElectionTTL: c.ElectionTTL}
}

package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/reaper"
)

// Setting names under which runtime threshold overrides are stored; they
// are shared by every replica through the settings table.
const (
	settingAgentLost    = "threshold.agent_lost"
	settingDispatchLost = "threshold.dispatch_lost"
	settingOrphan       = "threshold.orphan"
)

// Thresholds returns the effective reaper thresholds: runtime overrides
// (set through this API on any replica) over the configured values.
func (s *Scheduler) Thresholds() reaper.Thresholds {
	s.thMu.RLock()
	defer s.thMu.RUnlock()
	return s.effective
}

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
// the leader picks them up at its next sweep. Errors name the field and
// the rule; nothing is changed on error.
func (s *Scheduler) UpdateThresholds(ctx context.Context, agentLost, dispatchLost, orphan *time.Duration) error {
	s.thMu.Lock()
	defer s.thMu.Unlock()
	next := s.effective
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
	if err := next.ValidateTiming(s.cfg.timing()); err != nil {
		return err
	}
	if err := s.cfg.Store.PutSettings(ctx, kv); err != nil {
		return err
	}
	s.effective = next
	return nil
}

// ResetThresholds drops the runtime overrides, returning to the
// configured values.
func (s *Scheduler) ResetThresholds(ctx context.Context) error {
	if err := s.cfg.Store.DeleteSettings(ctx, settingAgentLost, settingDispatchLost, settingOrphan); err != nil {
		return err
	}
	return s.RefreshThresholds(ctx)
}

// RefreshThresholds re-reads the overrides from the database. An override
// that no longer validates (e.g. the heartbeat interval grew) is ignored
// with a warning, keeping the configured value.
func (s *Scheduler) RefreshThresholds(ctx context.Context) error {
	kv, err := s.cfg.Store.Settings(ctx)
	if err != nil {
		return err
	}
	next := s.cfg.Thresholds
	for name, dst := range map[string]*time.Duration{
		settingAgentLost: &next.AgentLost, settingDispatchLost: &next.DispatchLost, settingOrphan: &next.Orphan,
	} {
		if v, ok := kv[name]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				s.log.Warn("ignoring malformed threshold override", "setting", name, "value", v, "err", err)
				continue
			}
			*dst = d
		}
	}
	if err := next.ValidateTiming(s.cfg.timing()); err != nil {
		s.log.Warn("ignoring threshold overrides that do not validate", "err", err)
		next = s.cfg.Thresholds
	}
	s.thMu.Lock()
	s.effective = next
	s.thMu.Unlock()
	return nil
}

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

package reaper

import (
	"errors"
	"fmt"
	"time"
)

// Default thresholds (DESIGN §6; Leoflow scheduler-resilience defaults).
const (
	DefaultAgentLost    = 90 * time.Second // 6 × the 15 s heartbeat
	DefaultDispatchLost = 3 * time.Minute
	DefaultOrphan       = 5 * time.Minute
	// MaxDispatchAttempts caps never-started requeues (KiCI, horsies).
	MaxDispatchAttempts = 5
)

// Bounds on thresholds (horsies recovery-config bounds, widened for
// dispatch and orphan which have no heartbeat behind them).
const (
	MinThreshold          = time.Second
	MaxAgentLostThreshold = 2 * time.Hour
	MaxOtherThreshold     = 24 * time.Hour
)

// Thresholds are the three reaper thresholds.
type Thresholds struct {
	AgentLost    time.Duration
	DispatchLost time.Duration
	Orphan       time.Duration
}

// DefaultThresholds returns Vigil's defaults.
func DefaultThresholds() Thresholds {
	return Thresholds{AgentLost: DefaultAgentLost, DispatchLost: DefaultDispatchLost, Orphan: DefaultOrphan}
}

// Validate checks each threshold against its bounds and agent-lost
// against heartbeatInterval: a stale threshold must be at least twice the
// heartbeat interval, or one late heartbeat would reap a healthy task
// (horsies "threshold >= 2x interval"). Every violation is reported, each
// naming its field.
func (t Thresholds) Validate(heartbeatInterval time.Duration) error {
	var errs []error
	check := func(field string, d, max time.Duration) {
		if d < MinThreshold || d > max {
			errs = append(errs, fmt.Errorf("%s: %s is outside %s..%s", field, d, MinThreshold, max))
		}
	}
	check("agent-lost-threshold", t.AgentLost, MaxAgentLostThreshold)
	check("dispatch-lost-threshold", t.DispatchLost, MaxOtherThreshold)
	check("orphan-threshold", t.Orphan, MaxOtherThreshold)
	if heartbeatInterval > 0 && t.AgentLost < 2*heartbeatInterval {
		errs = append(errs, fmt.Errorf("agent-lost-threshold: %s must be at least 2 × the heartbeat interval (%s), i.e. ≥ %s",
			t.AgentLost, heartbeatInterval, 2*heartbeatInterval))
	}
	return errors.Join(errs...)
}

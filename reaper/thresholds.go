package reaper

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Default thresholds (docs/design.md §6; Leoflow scheduler-resilience defaults).
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

// Fields of Thresholds, as FieldError names them. Each caller maps them
// to the name its user typed: the API to its JSON fields, the server to its
// flags, the config loader to its file keys.
const (
	FieldAgentLost    = "AgentLost"
	FieldDispatchLost = "DispatchLost"
	FieldOrphan       = "Orphan"
)

// FieldError is a threshold that breaks a rule. Field is one of the Field
// constants; Rule says what is wrong with Value, without naming the field,
// so that a caller can name it as its user knows it.
type FieldError struct {
	Field string
	Value time.Duration
	Rule  string
}

// Error reads like "AgentLost: 5s must be at least ...".
func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s %s", e.Field, e.Value, e.Rule) }

// Validate checks each threshold against its bounds and agent-lost
// against heartbeatInterval: a stale threshold must be at least twice the
// heartbeat interval, or one late heartbeat would reap a healthy task
// (horsies "threshold >= 2x interval"). Every violation is reported as a
// *FieldError, joined with errors.Join.
func (t Thresholds) Validate(heartbeatInterval time.Duration) error {
	var errs []error
	check := func(field string, d, max time.Duration) {
		if d < MinThreshold || d > max {
			errs = append(errs, &FieldError{Field: field, Value: d, Rule: fmt.Sprintf("is outside %s..%s", MinThreshold, max)})
		}
	}
	check(FieldAgentLost, t.AgentLost, MaxAgentLostThreshold)
	check(FieldDispatchLost, t.DispatchLost, MaxOtherThreshold)
	check(FieldOrphan, t.Orphan, MaxOtherThreshold)
	if heartbeatInterval > 0 && t.AgentLost < 2*heartbeatInterval {
		errs = append(errs, &FieldError{Field: FieldAgentLost, Value: t.AgentLost, Rule: fmt.Sprintf(
			"must be at least 2 × the heartbeat interval (%s), i.e. ≥ %s", heartbeatInterval, 2*heartbeatInterval)})
	}
	return errors.Join(errs...)
}

// FieldErrors returns every *FieldError in err's tree (a single one,
// wrapped ones, or an errors.Join of them), in order.
func FieldErrors(err error) []*FieldError {
	if fe, ok := err.(*FieldError); ok {
		return []*FieldError{fe}
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		var out []*FieldError
		for _, e := range u.Unwrap() {
			out = append(out, FieldErrors(e)...)
		}
		return out
	case interface{ Unwrap() error }:
		return FieldErrors(u.Unwrap())
	}
	return nil
}

// RenameFields rewrites err, when it holds only *FieldErrors, as one
// error whose lines name each field by name(field), e.g. a flag or a JSON
// field; any other error is returned as it is.
func RenameFields(err error, name func(field string) string) error {
	fes := FieldErrors(err)
	if err == nil || len(fes) == 0 {
		return err
	}
	lines := make([]string, len(fes))
	for i, fe := range fes {
		lines[i] = fmt.Sprintf("%s: %s %s", name(fe.Field), fe.Value, fe.Rule)
	}
	return errors.New(strings.Join(lines, "\n"))
}

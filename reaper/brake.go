package reaper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/state"
)

// The mass-silence brake, after the Kubernetes node lifecycle controller's
// unhealthy-zone threshold: the post-leadership grace covers outages the
// leader itself sees, but when many agents go silent at once while the
// leader is healthy (a load balancer, a partition, API replicas out of
// connections), the cause is far more likely between them and the control
// plane than in every one of them. Reaping their work would fail healthy
// tasks across the fleet, so agent-lost and dispatch-lost hold until the
// fraction recovers or an operator forces a sweep (vigil reap).

// Defaults of the mass-silence brake.
const (
	DefaultMassSilenceFraction  = 0.5
	DefaultMassSilenceMinAgents = 3
)

// MassSilence configures the brake. It engages when more than Fraction of
// the agents active at the start of one agent-lost window went silent
// within that window, provided at least MinAgents were active.
type MassSilence struct {
	// Fraction is the share of active agents, 0 ≤ Fraction < 1, that must
	// be exceeded; 0 disables the brake.
	Fraction float64
	// MinAgents is how many agents must have been active for the brake to
	// judge at all (≥ 1); a smaller fleet is reaped agent by agent.
	MinAgents int
}

// DefaultMassSilence returns 50 % with at least 3 active agents.
func DefaultMassSilence() MassSilence {
	return MassSilence{Fraction: DefaultMassSilenceFraction, MinAgents: DefaultMassSilenceMinAgents}
}

// Engages reports whether silent of active agents engage the brake: at
// least MinAgents active, and strictly more than Fraction of them silent
// (half of four is not "more than half"; the Kubernetes node lifecycle
// controller's unhealthy-zone rule is the same strict inequality).
func (m MassSilence) Engages(silent, active int) bool {
	return m.Enabled() && active >= m.MinAgents && float64(silent) > m.Fraction*float64(active)
}

// Enabled reports whether the brake can engage.
func (m MassSilence) Enabled() bool { return m.Fraction > 0 }

// Validate checks both fields; every violation is reported, each naming
// its flag.
func (m MassSilence) Validate() error {
	var errs []error
	if m.Fraction < 0 || m.Fraction >= 1 {
		errs = append(errs, fmt.Errorf("mass-silence-fraction: %g must be at least 0 (0 disables the brake) and below 1", m.Fraction))
	}
	if m.MinAgents < 1 {
		errs = append(errs, fmt.Errorf("mass-silence-min-agents: %d must be at least 1", m.MinAgents))
	}
	return errors.Join(errs...)
}

// Brake is the brake's verdict at one reaper pass.
type Brake struct {
	Engaged bool
	// Silent and Active are the agents that went silent within the window
	// and the agents active when it opened (Silent included).
	Silent, Active int
	// Since is when this engagement began, on the reaper clock (zero while
	// released). Anchor is the last heartbeat of the latest silent agent.
	Since, Anchor time.Time
	// CheckedAt is the reaper clock at the verdict (zero before the first).
	CheckedAt time.Time
	Message   string // why it holds, or empty
}

// Brake returns the last verdict of a leader pass (not of dry runs or
// forced sweeps); the zero Brake before any.
func (r *Reapers) Brake() Brake {
	r.brakeMu.Lock()
	defer r.brakeMu.Unlock()
	return r.brake
}

// ResetBrake forgets the last verdict; a new term calls it, so a follower
// that leads again does not report its previous term's brake.
func (r *Reapers) ResetBrake() {
	r.brakeMu.Lock()
	r.brake = Brake{}
	r.forced = nil
	r.brakeMu.Unlock()
}

// forcedThroughFollower reports whether an operator asked a follower for a
// forced sweep (store.RequestForcedSweep) during this term that reaper
// name has not yet honoured, and marks it honoured by the pass at now:
// each such request lets one pass of each held reaper through, every page
// of it (the pages of one pass share now). A failed read honours nothing.
func (r *Reapers) forcedThroughFollower(ctx context.Context, name state.Reaper, now time.Time, term Term) (time.Time, bool) {
	at, err := r.cfg.Store.ForcedSweepRequestedAt(ctx)
	if err != nil {
		r.log.Warn("could not read forced sweep requests; the brake holds", "err", err)
		return time.Time{}, false
	}
	if at.IsZero() || !at.After(term.GraceStart) {
		return time.Time{}, false
	}
	r.brakeMu.Lock()
	defer r.brakeMu.Unlock()
	last := r.forced[name]
	if at.Equal(last.request) && now.Equal(last.pass) {
		return at, true // a later page of the pass that honours it
	}
	if !at.After(last.request) {
		return time.Time{}, false
	}
	if r.forced == nil {
		r.forced = map[state.Reaper]honoured{}
	}
	r.forced[name] = honoured{request: at, pass: now}
	return at, true
}

// holdForSilence decides, for reaper name at now, whether the brake holds
// it. It returns held and a notice for the report; a forced term (vigil
// reap, or a dry run) is never held, and its notice says the brake was
// bypassed. An error (the agents could not be read) holds the pass as the
// reaper's list error would.
func (r *Reapers) holdForSilence(ctx context.Context, name state.Reaper, now time.Time, term Term, th Thresholds) (bool, string, error) {
	ms := r.ms
	if !ms.Enabled() {
		return false, "", nil
	}
	w, err := r.cfg.Store.MassSilenceWindow(ctx, now, th.AgentLost)
	if err != nil {
		return false, "", err
	}
	engaged := ms.Engages(w.Silent, w.Active)
	v := Brake{Engaged: engaged, Silent: w.Silent, Active: w.Active, Anchor: w.Anchor, CheckedAt: now}
	if engaged {
		v.Message = fmt.Sprintf("mass-silence brake engaged: %d of %d active agents went silent within %s (last heartbeat of the latest %s); more than %g%% of at least %d, so agent-lost and dispatch-lost reaping holds until they return (force a sweep with vigil reap)",
			w.Silent, w.Active, th.AgentLost, w.Anchor.UTC().Format(time.RFC3339), ms.Fraction*100, ms.MinAgents)
	}
	if !term.Force {
		r.recordBrake(v, now)
	}
	switch {
	case !engaged:
		return false, "", nil
	case term.Force:
		return false, v.Message + "; bypassed by this forced sweep", nil
	}
	if at, ok := r.forcedThroughFollower(ctx, name, now, term); ok {
		return false, fmt.Sprintf("%s; bypassed by the forced sweep requested through a follower at %s",
			v.Message, at.UTC().Format(time.RFC3339)), nil
	}
	decision := metrics.DecisionAgentLostHeld
	if name == state.ReaperDispatchLost {
		decision = metrics.DecisionDispatchLostHeld
	}
	r.cfg.Metrics.Decide(decision)
	r.log.Warn("scheduler decision", "decision", decision, "reaper", name, "silent_agents", w.Silent,
		"active_agents", w.Active, "fraction", ms.Fraction, "min_agents", ms.MinAgents, "message", v.Message)
	return true, v.Message, nil
}

// recordBrake stores verdict v of a leader pass at now, keeps Since across
// an engagement, sets the brake gauge and logs each engagement and release
// once.
func (r *Reapers) recordBrake(v Brake, now time.Time) {
	r.brakeMu.Lock()
	prev := r.brake
	if v.Engaged {
		v.Since = prev.Since
		if !prev.Engaged {
			v.Since = now
		}
	}
	r.brake = v
	r.brakeMu.Unlock()
	gauge := 0.0
	if v.Engaged {
		gauge = 1
	}
	r.cfg.Metrics.MassSilenceBrake.Set(gauge)
	switch {
	case v.Engaged && !prev.Engaged:
		r.log.Warn("mass-silence brake engaged", "silent_agents", v.Silent, "active_agents", v.Active, "message", v.Message)
	case !v.Engaged && prev.Engaged:
		r.log.Info("mass-silence brake released: reaping resumes", "silent_agents", v.Silent, "active_agents", v.Active,
			"held_for", now.Sub(prev.Since).Round(time.Second))
	}
}

// honoured is the follower-forced sweep request a reaper last let through,
// and the pass (its now) that did.
type honoured struct{ request, pass time.Time }

package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/leader"
)

// HealthReport is the body of GET /monitor/health (docs/design.md §10).
type HealthReport struct {
	Status     string               `json:"status"` // "ok" | "unhealthy"
	Error      string               `json:"error,omitempty"`
	Database   string               `json:"database"` // "ok" | error text
	Leader     *leader.Status       `json:"leader,omitempty"`
	LastTick   *time.Time           `json:"last_tick,omitempty"`
	Interval   string               `json:"tick_interval,omitempty"`
	Thresholds *protocol.Thresholds `json:"thresholds,omitempty"`
	// MassSilenceBrake is the leader's mass-silence brake, once one of its
	// agent-lost or dispatch-lost passes judged it; absent on followers.
	// Engaged does not make the report unhealthy: the brake is the
	// scheduler protecting work, and vigil_mass_silence_brake alerts on it.
	MassSilenceBrake *MassSilenceBrake `json:"mass_silence_brake,omitempty"`
	// LeaderFenceBlocked is true while the leader fence refuses this
	// replica's candidacy (leader.Status.FenceBlocked; the reason is in
	// Error and leader.fence_blocked_reason): the report is then
	// "unhealthy" with 503, because nobody can lead until an operator runs
	// `vigil fence reset`.
	LeaderFenceBlocked bool `json:"leader_fence_blocked,omitempty"`
}

// MassSilenceBrake is the mass-silence brake's state in HealthReport
// (docs/scheduler-resilience.md): while Engaged, agent-lost and
// dispatch-lost reaping hold because SilentAgents of ActiveAgents went
// silent within one agent-lost threshold; Since is when it engaged.
type MassSilenceBrake struct {
	Engaged      bool       `json:"engaged"`
	SilentAgents int        `json:"silent_agents"`
	ActiveAgents int        `json:"active_agents"`
	Since        *time.Time `json:"since,omitempty"`
	CheckedAt    time.Time  `json:"checked_at"`
	Message      string     `json:"message,omitempty"`
}

// healthz is liveness: the process serves HTTP.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz is readiness: the database is reachable and fully migrated.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	ok, err := s.cfg.Store.Migrated(ctx)
	if err == nil && !ok {
		err = errNotMigrated
	}
	if err != nil {
		msg := err.Error()
		if !errors.Is(err, errNotMigrated) { // driver text is for the log
			s.log.Warn("readyz: database", "request_id", requestID(r), "err", err)
			msg = "database unreachable; the server log has the detail under request id " + requestID(r)
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "error": msg})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// monitorHealth returns 200 with the report, or 503 when the scheduler's
// Heartbeat() is unhealthy or the leader fence blocks this replica.
func (s *Server) monitorHealth(w http.ResponseWriter, r *http.Request) {
	rep := HealthReport{Status: "ok", Database: "ok"}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.cfg.Store.Ping(ctx); err != nil {
		s.log.Warn("monitor/health: database", "request_id", requestID(r), "err", err)
		rep.Database = "unreachable; the server log has the detail under request id " + requestID(r)
	}
	if s.cfg.LeaderStatus != nil {
		st := s.cfg.LeaderStatus()
		rep.Leader = &st
	}
	code := http.StatusOK
	h := s.cfg.Control
	if t := h.LastTick(); !t.IsZero() {
		rep.LastTick = &t
	}
	rep.Interval = h.Interval().String()
	th := toProtocol(h.Thresholds())
	rep.Thresholds = &th
	if b := h.MassSilence(); !b.CheckedAt.IsZero() {
		rep.MassSilenceBrake = &MassSilenceBrake{Engaged: b.Engaged, SilentAgents: b.Silent, ActiveAgents: b.Active,
			CheckedAt: b.CheckedAt, Message: b.Message}
		if b.Engaged {
			rep.MassSilenceBrake.Since = &b.Since
		}
	}
	if err := h.Heartbeat(ctx); err != nil {
		rep.Status, rep.Error, code = "unhealthy", err.Error(), http.StatusServiceUnavailable
		if rep.Database != "ok" { // the heartbeat's error carries the driver's text: for the log
			s.log.Warn("monitor/health: scheduler heartbeat", "request_id", requestID(r), "err", err)
			rep.Error = "database unreachable; the server log has the detail under request id " + requestID(r)
		}
	}
	if rep.Leader != nil && rep.Leader.FenceBlocked {
		rep.LeaderFenceBlocked = true
		rep.Status, code = "unhealthy", http.StatusServiceUnavailable
		if rep.Error == "" {
			rep.Error = rep.Leader.FenceBlockedReason
		}
	}
	writeJSON(w, code, rep)
}

package api

import (
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/cluster"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/reaper"
)

func toProtocol(t reaper.Thresholds) protocol.Thresholds {
	return protocol.Thresholds{
		AgentLost: protocol.Duration(t.AgentLost), DispatchLost: protocol.Duration(t.DispatchLost),
		Orphan: protocol.Duration(t.Orphan),
	}
}

// getThresholds returns the effective thresholds, re-read from the
// database so every replica answers the same.
func (s *Server) getThresholds(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Control.RefreshThresholds(r.Context()); err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toProtocol(s.cfg.Control.Thresholds()))
}

// thresholdJSONField maps reaper.FieldError fields to the JSON fields of
// protocol.Thresholds.
var thresholdJSONField = map[string]string{
	reaper.FieldAgentLost: "agent_lost", reaper.FieldDispatchLost: "dispatch_lost", reaper.FieldOrphan: "orphan",
}

// putThresholds validates and stores new thresholds for every replica;
// an invalid set is a 400 naming each field and rule, and changes nothing.
func (s *Server) putThresholds(w http.ResponseWriter, r *http.Request) {
	var req protocol.ThresholdsUpdate
	if !decode(w, r, &req) {
		return
	}
	if req.AgentLost == nil && req.DispatchLost == nil && req.Orphan == nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, "set at least one of agent_lost, dispatch_lost, orphan")
		return
	}
	ctl := s.cfg.Control
	if err := ctl.RefreshThresholds(r.Context()); err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	err := ctl.UpdateThresholds(r.Context(), durPtr(req.AgentLost), durPtr(req.DispatchLost), durPtr(req.Orphan))
	if err != nil {
		if len(reaper.FieldErrors(err)) == 0 {
			s.writeStoreError(w, r, err)
			return
		}
		// Name each field as this API's clients know it: the JSON field.
		err = reaper.RenameFields(err, func(field string) string { return thresholdJSONField[field] })
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, err.Error())
		return
	}
	th := ctl.Thresholds()
	s.log.Info("thresholds changed", "agent_lost", th.AgentLost, "dispatch_lost", th.DispatchLost, "orphan", th.Orphan, "actor", actorOf(r))
	writeJSON(w, http.StatusOK, toProtocol(th))
}

func (s *Server) resetThresholds(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Control.ResetThresholds(r.Context()); err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Info("thresholds reset to the configured values", "actor", actorOf(r))
	writeJSON(w, http.StatusOK, toProtocol(s.cfg.Control.Thresholds()))
}

func durPtr(d *protocol.Duration) *time.Duration {
	if d == nil {
		return nil
	}
	v := d.D()
	return &v
}

// reapDryRun lists every reaper candidate with its signal and age.
func (s *Server) reapDryRun(w http.ResponseWriter, r *http.Request) {
	dry, err := s.cfg.Control.DryRun(r.Context())
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	rep := toReapReport(dry)
	s.fillLeader(&rep)
	writeJSON(w, http.StatusOK, rep)
}

// reapNow forces a sweep: here when this replica leads, otherwise by
// asking the leader through the settings table and NOTIFY (202 Accepted),
// so the leader's next passes bypass the mass-silence brake as a forced
// sweep here would.
func (s *Server) reapNow(w http.ResponseWriter, r *http.Request) {
	swept, err := s.cfg.Control.SweepNow(r.Context())
	if errors.Is(err, leader.ErrNotLeading) {
		if err := s.cfg.Store.RequestForcedSweep(r.Context()); err != nil {
			s.writeStoreError(w, r, err)
			return
		}
		rep := protocol.ReapReport{Forwarded: true, Candidates: []protocol.ReapCandidate{}}
		s.fillLeader(&rep)
		writeJSON(w, http.StatusAccepted, rep)
		return
	}
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	rep := toReapReport(swept)
	s.fillLeader(&rep)
	writeJSON(w, http.StatusOK, rep)
}

func (s *Server) fillLeader(rep *protocol.ReapReport) {
	if s.cfg.LeaderStatus != nil {
		rep.Leader = s.cfg.LeaderStatus().Leader
	}
}

// atRisk lists the work a reaper will act on if nothing changes, with the
// time left before it does (reaper.Reapers.AtRisk); ?run_id=N limits it
// to one run (the run page's hints).
func (s *Server) atRisk(w http.ResponseWriter, r *http.Request) {
	runID, ok := queryInt(w, r, "run_id", math.MaxInt64)
	if !ok {
		return
	}
	rep, err := s.cfg.Control.AtRisk(r.Context(), runID)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAtRisk(rep))
}

// cluster shows the leader, its epoch and every replica seen, each with
// its reapers' last sweeps, decision counters, grace and brake: read from
// the database (cluster.Read), so every replica answers the same.
func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	self := ""
	if s.cfg.LeaderStatus != nil {
		self = s.cfg.LeaderStatus().Self
	}
	view, err := cluster.Read(r.Context(), s.cfg.Store, self)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out, err := toCluster(view)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	if err := s.cfg.Control.RefreshThresholds(r.Context()); err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out.Thresholds = toProtocol(s.cfg.Control.Thresholds())
	out.HeartbeatInterval = protocol.Duration(s.cfg.HeartbeatInterval)
	writeJSON(w, http.StatusOK, out)
}

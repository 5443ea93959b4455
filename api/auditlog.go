package api

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/store"
)

// listAudit serves a page of the audit log, newest first (admin):
// ?actor=NAME, ?target=PREFIX (of the path below /v1/, "runs/42"),
// ?since=TIME|DURATION (RFC 3339, or a Go duration back from the
// database clock's now), ?before=ID (the cursor) and ?limit=N
// (1..protocol.AuditPageMax, default protocol.AuditPageDefault).
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.AuditFilter{Actor: q.Get("actor"), Target: q.Get("target")}
	for name, v := range map[string]string{"actor": f.Actor, "target": f.Target} {
		if len(v) > 256 {
			writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, fmt.Sprintf("query parameter %s: at most 256 bytes", name))
			return
		}
	}
	if v := q.Get("since"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			f.SinceAgo = d
		} else if t, err := time.Parse(time.RFC3339, v); err == nil {
			f.Since = t
		} else {
			writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, fmt.Sprintf(
				"query parameter since: %q is neither an RFC 3339 time (2026-11-27T15:00:00Z) nor a positive Go duration (24h)", v))
			return
		}
	}
	before, ok := queryInt(w, r, "before", math.MaxInt64)
	if !ok {
		return
	}
	f.Before = before
	if f.Limit, ok = queryLimit(w, r, "limit", protocol.AuditPageDefault, protocol.AuditPageMax); !ok {
		return
	}
	page, err := s.cfg.Store.ListAudit(r.Context(), f)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out := protocol.AuditList{Records: make([]protocol.AuditRecord, len(page.Records)), NextCursor: page.NextCursor}
	for i, a := range page.Records {
		out.Records[i] = protocol.AuditRecord{ID: a.ID, At: a.At, Actor: a.Actor, Role: a.Role, Auth: a.Auth, Method: a.Method,
			Route: a.Route, Target: a.Target, RequestID: a.RequestID, Client: a.Client, Result: a.Result, Status: a.Status, Message: a.Message}
	}
	writeJSON(w, http.StatusOK, out)
}

// resetFence starts a new generation of the leader fence (admin; `vigil
// fence reset`): store.ResetFence, with the caller as the actor and the
// audit row in the reset's transaction.
func (s *Server) resetFence(w http.ResponseWriter, r *http.Request) {
	var req protocol.FenceResetRequest
	if !decode(w, r, &req) {
		return
	}
	switch {
	case strings.TrimSpace(req.Reason) == "":
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, "reason: required: say why the fence is reset (it is recorded in the audit)")
		return
	case !reasonOK(w, req.Reason):
		return
	}
	before, after, err := s.cfg.Store.ResetFence(r.Context(), actorOf(r), req.Reason)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Warn("leader fence reset (audited)", "actor", actorOf(r), "reason", req.Reason,
		"before_generation", before.Generation, "generation", after.Generation, "request_id", requestID(r))
	writeJSON(w, http.StatusOK, protocol.FenceResetResponse{Before: toFence(before), After: toFence(after), Actor: actorOf(r), Reason: req.Reason})
}

func toFence(f store.FenceState) protocol.Fence {
	return protocol.Fence{Name: f.Name, Generation: f.Generation, Domain: string(f.Domain), Revision: f.Revision,
		Epoch: f.Epoch, Holder: f.Holder, AcquiredAt: f.AcquiredAt}
}

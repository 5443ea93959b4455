package api

import (
	"fmt"
	"net/http"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// reasonOK writes a 400 naming the field when an operator's reason is too
// long.
func reasonOK(w http.ResponseWriter, reason string) bool {
	if len(reason) > protocol.MaxReasonLen {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("request body: reason: %d bytes, more than %d", len(reason), protocol.MaxReasonLen))
		return false
	}
	return true
}

// clearRun serves POST /v1/runs/{run_id}/clear (docs/rerun.md): 200 with
// what was (or, dry_run, would be) cleared; 404 for an unknown run or
// task; 409 for a queued or cancelled run, or naming each selected task
// instance that is queued or running.
func (s *Server) clearRun(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run_id")
	if !ok {
		return
	}
	var req protocol.ClearRequest
	if !decodeOptional(w, r, &req) || !reasonOK(w, req.Reason) {
		return
	}
	actor := actorOf(r)
	res, err := s.cfg.Store.ClearTIs(r.Context(), store.ClearRequest{RunID: id, TaskIDs: req.TaskIDs,
		Downstream: req.Downstream, Upstream: req.Upstream, OnlyFailed: req.OnlyFailed, DryRun: req.DryRun,
		Actor: actor, Reason: req.Reason})
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out := protocol.ClearResponse{Run: toRun(res.Run), DryRun: req.DryRun, Cleared: []protocol.ClearedTI{}}
	for _, c := range res.Cleared {
		out.Cleared = append(out.Cleared, protocol.ClearedTI{TaskID: c.TaskID, State: string(c.State),
			TryNumber: c.TryNumber, Rederived: c.Rederived})
	}
	if !req.DryRun {
		s.log.Info("run cleared", "run_id", id, "actor", actor, "cleared", len(out.Cleared))
	}
	writeJSON(w, http.StatusOK, out)
}

// markTI serves POST /v1/runs/{run_id}/tasks/{task_id}/mark
// (docs/rerun.md): 200 with what was set; 400 for a state other than
// success or failed; 404 and 409 as clearRun.
func (s *Server) markTI(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run_id")
	if !ok {
		return
	}
	var req protocol.MarkRequest
	if !decode(w, r, &req) || !reasonOK(w, req.Reason) {
		return
	}
	to := state.TI(req.State)
	if to != state.TISuccess && to != state.TIFailed {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("request body: state: %q: a task instance is marked success or failed", req.State))
		return
	}
	actor := actorOf(r)
	taskID := r.PathValue("task_id")
	res, err := s.cfg.Store.MarkTI(r.Context(), store.MarkRequest{RunID: id, TaskID: taskID, To: to,
		Downstream: req.Downstream, Actor: actor, Reason: req.Reason})
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out := protocol.MarkResponse{Run: toRun(res.Run), Marked: []protocol.MarkedTI{}, Reopened: res.Reopened}
	if out.Reopened == nil {
		out.Reopened = []string{}
	}
	for _, m := range res.Marked {
		out.Marked = append(out.Marked, protocol.MarkedTI{TaskID: m.TaskID, State: string(m.State)})
	}
	s.log.Info("task instances marked", "run_id", id, "task_id", taskID, "state", to, "actor", actor, "marked", len(out.Marked))
	writeJSON(w, http.StatusOK, out)
}

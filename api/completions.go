package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// validateCompletion checks one completion body and converts it; field
// prefixes the field names of the error ("" for the single route,
// "completions[3]." in a batch).
func validateCompletion(field string, req protocol.CompleteRequest) (store.Completion, error) {
	if err := validateAttempt(field+"attempt", req.Attempt); err != nil {
		return store.Completion{}, err
	}
	if !knownOutcome(req.Outcome) {
		return store.Completion{}, fmt.Errorf("%soutcome: %q must be one of %s", field, req.Outcome, joinWords(state.Outcomes()))
	}
	if err := validateFailure(req); err != nil {
		return store.Completion{}, fmt.Errorf("%s%w", field, err)
	}
	if err := checkOutputs(&req); err != nil {
		return store.Completion{}, fmt.Errorf("%s%w", field, err)
	}
	return fromComplete(req), nil
}

// complete is the single-completion route, kept beside completions for
// agents that send one at a time and for replays.
func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	var req protocol.CompleteRequest
	agentID, ok := agentRequest(w, r, &req)
	if !ok {
		return
	}
	c, err := validateCompletion("", req)
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, err.Error())
		return
	}
	newState, late, err := s.cfg.Store.Complete(r.Context(), agentID, c)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.logCompletion(r.Context(), agentID, req, newState, late)
	writeJSON(w, http.StatusOK, protocol.CompleteResponse{State: string(newState)})
}

// completions applies a batch of completions (store.CompleteBatch): a
// malformed item rejects the whole request with 400 naming it, and
// nothing is written; otherwise every item gets its own result, an
// accepted state or the error the single route would have answered.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req protocol.CompleteBatchRequest
	agentID, ok := agentRequest(w, r, &req)
	if !ok {
		return
	}
	if n := len(req.Completions); n == 0 || n > protocol.MaxCompletionBatch {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("completions: %d items, must be 1..%d", n, protocol.MaxCompletionBatch))
		return
	}
	batch := make([]store.Completion, len(req.Completions))
	for i, c := range req.Completions {
		var err error
		if batch[i], err = validateCompletion(fmt.Sprintf("completions[%d].", i), c); err != nil {
			writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, err.Error())
			return
		}
	}
	results := s.cfg.Store.CompleteBatch(r.Context(), agentID, batch)
	out := protocol.CompleteBatchResponse{Results: make([]protocol.CompletionResult, len(results))}
	for i, res := range results {
		out.Results[i].Attempt = req.Completions[i].Attempt
		if res.Err != nil {
			_, detail := s.storeErrorDetail(r, res.Err)
			out.Results[i].Error = &detail
			continue
		}
		out.Results[i].State = string(res.State)
		s.logCompletion(r.Context(), agentID, req.Completions[i], res.State, res.Late)
	}
	writeJSON(w, http.StatusOK, out)
}

// logCompletion records an accepted completion: the late-completion
// decision metric and line, and the per-TI line, debug-level unless the
// TI did not succeed (the events table has them all).
func (s *Server) logCompletion(ctx context.Context, agentID int64, req protocol.CompleteRequest, newState state.TI, late bool) {
	if late {
		// A late success accepted while the run was live made the TI
		// success; one whose run had ended left it as it was, recorded.
		decision := metrics.DecisionLateCompletion
		if newState != state.TISuccess {
			decision = metrics.DecisionLateCompletionRecorded
		}
		s.cfg.Metrics.Decide(decision)
		s.log.Info("scheduler decision", "decision", decision, "ti_id", req.TIID,
			"attempt_id", req.AttemptID, "agent_id", agentID, "state", newState)
	}
	level := slog.LevelDebug
	if newState != state.TISuccess {
		level = slog.LevelInfo
	}
	if !s.log.Enabled(ctx, level) {
		return
	}
	done := []any{"agent_id", agentID, "ti_id", req.TIID, "attempt_id", req.AttemptID, "outcome", req.Outcome}
	if req.ExitCode != nil { // the value, not the pointer (exit_code=0xc000…)
		done = append(done, "exit_code", *req.ExitCode)
	}
	s.log.Log(ctx, level, "task instance completed", append(done, "state", newState)...)
}

package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/outputs"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// Task outputs at the API edge (docs/task-environment.md, "Outputs"). An
// agent is not trusted to keep the rules, so the server checks what one
// sends with the agent's own rules (package outputs), and builds each
// claimed task's VIGIL_INPUT_* variables itself.

// checkOutputs checks a completion's outputs: allowed only with a
// success, each key by outputs.KeyRule, each value UTF-8 without NUL (a
// 400 naming the key). Outputs over outputs.MaxBytes turn the success
// into the failure output_too_large, as the agent would have reported it,
// so a TI's stored outputs never exceed the limit whatever the agent.
func checkOutputs(req *protocol.CompleteRequest) error {
	if len(req.Outputs) == 0 {
		return nil
	}
	if req.Outcome != state.OutcomeSuccess {
		return fmt.Errorf("outputs: allowed only with outcome %q, got outcome %q", state.OutcomeSuccess, req.Outcome)
	}
	err := outputs.Check(req.Outputs)
	var tooLarge *outputs.TooLargeError
	switch {
	case errors.As(err, &tooLarge):
		req.Outcome, req.Failure, req.Error, req.Outputs = state.OutcomeFailed, state.FailureOutputTooLarge, err.Error(), nil
		return nil
	case err != nil:
		return fmt.Errorf("outputs: %w", err)
	}
	return nil
}

// upstreamOf lists which claimed TIs have upstream tasks, in the order of
// tasks, for attachInputs.
func upstreamOf(tasks []store.ClaimedTask) []bool {
	return convertSlice(tasks, func(t store.ClaimedTask) bool { return t.HasUpstream })
}

// attachInputs gives each claimed task that has upstreams their outputs
// as its Inputs (outputs.InputEnv), with one read for the whole claim and
// none when no task has an upstream. A task whose inputs cannot be
// delivered (two outputs named alike, or over outputs.MaxInputBytes) is
// completed failed start_failed with the reason, as the agent would fail
// a start, and left out of the reply.
func (s *Server) attachInputs(ctx context.Context, agentID int64, tasks []protocol.ClaimedTask, hasUp []bool) ([]protocol.ClaimedTask, error) {
	var ids []int64
	for i, t := range tasks {
		if hasUp[i] {
			ids = append(ids, t.TIID)
		}
	}
	if len(ids) == 0 {
		return tasks, nil
	}
	up, err := s.cfg.Store.UpstreamOutputs(ctx, ids, outputs.MaxInputBytes)
	if err != nil {
		return nil, err
	}
	out := tasks[:0]
	for _, t := range tasks {
		in, ok := up[t.TIID]
		if !ok {
			out = append(out, t)
			continue
		}
		var why string
		if in.Outputs == nil {
			why = fmt.Sprintf("inputs: the outputs of this task's upstreams are %d bytes, over the limit of %d bytes of VIGIL_INPUT_* variables; pass large data through files or object storage",
				in.Bytes, outputs.MaxInputBytes)
		} else if t.Inputs, err = outputs.InputEnv(in.Outputs); err != nil {
			why = err.Error()
		}
		if why == "" {
			out = append(out, t)
			continue
		}
		s.log.Warn("claimed task instance failed: inputs cannot be delivered", "agent_id", agentID, "ti_id", t.TIID,
			"run_id", t.RunID, "task_id", t.TaskID, "try_number", t.TryNumber, "why", why)
		_, _, err := s.cfg.Store.Complete(ctx, agentID, store.Completion{Attempt: fromAttempt(t.Attempt),
			Outcome: state.OutcomeFailed, Failure: state.FailureStartFailed, Error: why})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// runOutputs serves GET /v1/runs/{run_id}/outputs[?task_id=&after=]: a
// page of the run's outputs (store.RunOutputs), readable by every role
// that reads runs, as logs are (docs/security.md, "Secrets").
func (s *Server) runOutputs(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run_id")
	if !ok {
		return
	}
	after, ok := queryOrdinal(w, r, "after")
	if !ok {
		return
	}
	page, more, err := s.cfg.Store.RunOutputs(r.Context(), id, r.URL.Query().Get("task_id"), after)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out := protocol.OutputList{RunID: id, Outputs: make([]protocol.TIOutputs, len(page))}
	for i, o := range page {
		out.Outputs[i] = protocol.TIOutputs{TIID: o.TIID, TaskID: o.TaskID, TryNumber: o.TryNumber, Outputs: o.Outputs, Bytes: o.Bytes}
	}
	if more {
		next := page[len(page)-1].Ordinal
		out.NextCursor = &next
	}
	writeJSON(w, http.StatusOK, out)
}

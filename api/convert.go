package api

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// Conversions between the wire protocol's JSON shapes (api/protocol) and
// the store's own types, at the API edge (adr/0013-state-package.md).
// Typed states and reasons become their plain strings, durations become
// protocol.Durations, and nil slices and maps stay nil (empty ones stay
// empty), so the JSON is what it was when the store returned protocol
// types.

// convertSlice maps f over in, keeping a nil slice nil.
func convertSlice[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

func fromAttempt(a protocol.Attempt) store.Attempt {
	return store.Attempt{TIID: a.TIID, AttemptID: a.AttemptID}
}

func toAttempt(a store.Attempt) protocol.Attempt {
	return protocol.Attempt{TIID: a.TIID, AttemptID: a.AttemptID}
}

func toStopOrders(stops []store.StopOrder) []protocol.StopOrder {
	return convertSlice(stops, func(s store.StopOrder) protocol.StopOrder {
		return protocol.StopOrder{Attempt: toAttempt(s.Attempt), Reason: s.Reason}
	})
}

func fromRegister(req protocol.RegisterRequest) store.Registration {
	return store.Registration{Name: req.Name, Tags: req.Tags, Capacity: req.Capacity,
		InFlight: fromHeartbeatEntries(req.InFlight)}
}

func fromHeartbeatEntries(entries []protocol.HeartbeatEntry) []store.HeartbeatEntry {
	return convertSlice(entries, func(e protocol.HeartbeatEntry) store.HeartbeatEntry {
		return store.HeartbeatEntry{Attempt: fromAttempt(e.Attempt), Started: e.Started}
	})
}

func toClaimedTasks(tasks []store.ClaimedTask) []protocol.ClaimedTask {
	return convertSlice(tasks, func(t store.ClaimedTask) protocol.ClaimedTask {
		return protocol.ClaimedTask{Attempt: toAttempt(t.Attempt), RunID: t.RunID, DAGID: t.DAGID, TaskID: t.TaskID,
			TryNumber: t.TryNumber, Command: t.Command, Env: t.Env, ExecutionTimeout: protocol.Duration(t.ExecutionTimeout),
			RunType: t.RunType, LogicalDate: t.LogicalDate, DataIntervalStart: t.IntervalStart, DataIntervalEnd: t.IntervalEnd,
			Params: t.Params, RunAsUser: t.RunAsUser}
	})
}

// knownOutcome reports whether o is one of state.Outcomes().
func knownOutcome(o state.Outcome) bool { return slices.Contains(state.Outcomes(), o) }

func fromComplete(req protocol.CompleteRequest) store.Completion {
	return store.Completion{Attempt: fromAttempt(req.Attempt), Outcome: req.Outcome, ExitCode: req.ExitCode, Error: req.Error,
		Failure: req.Failure, Signal: req.Signal, Outputs: req.Outputs}
}

// secretRefs lists each claimed TI's secret references (variable →
// secret), in the order of tasks, for resolveSecrets.
func secretRefs(tasks []store.ClaimedTask) []map[string]string {
	return convertSlice(tasks, func(t store.ClaimedTask) map[string]string { return t.SecretRefs })
}

// joinWords lists typed words for an error message: "a, b, c".
func joinWords[T ~string](ws []T) string { return strings.Join(state.Strings(ws), ", ") }

// signalName is the shape of CompleteRequest.Signal: "SIGKILL",
// "SIGRTMIN+3".
var signalName = regexp.MustCompile(`^SIG[A-Z0-9]{1,10}([+-][0-9]{1,2})?$`)

// validateFailure checks CompleteRequest's optional failure and signal
// fields; the error names the field and the rule.
func validateFailure(req protocol.CompleteRequest) error {
	switch req.Failure {
	case "":
	default:
		if !slices.Contains(state.AgentFailures(), req.Failure) {
			return fmt.Errorf("failure: %q must be empty or one of %s", req.Failure, joinWords(state.AgentFailures()))
		}
		if req.Outcome != state.OutcomeFailed {
			return fmt.Errorf("failure: %q is allowed only with outcome %q, got outcome %q", req.Failure, state.OutcomeFailed, req.Outcome)
		}
	}
	switch {
	case req.Failure == state.FailureSignal && req.Signal == "":
		return fmt.Errorf("signal: required with failure %q", state.FailureSignal)
	case req.Failure != state.FailureSignal && req.Signal != "":
		return fmt.Errorf("signal: allowed only with failure %q", state.FailureSignal)
	case req.Signal != "" && !signalName.MatchString(req.Signal):
		return fmt.Errorf("signal: %q must be a signal name such as SIGKILL", req.Signal)
	}
	return nil
}

func fromLogLines(lines []protocol.LogLine) []store.LogLine {
	return convertSlice(lines, func(l protocol.LogLine) store.LogLine {
		return store.LogLine{Attempt: fromAttempt(l.Attempt), Seq: l.Seq, Stream: l.Stream, Time: l.Time, Line: l.Line, Dropped: l.Dropped}
	})
}

func toLogList(p store.LogPage) protocol.LogList {
	return protocol.LogList{
		Lines: convertSlice(p.Lines, func(l store.StoredLogLine) protocol.StoredLogLine {
			return protocol.StoredLogLine{ID: l.ID, TryNumber: l.TryNumber, Seq: l.Seq, Stream: l.Stream, Time: l.Time, Line: l.Line,
				Dropped: l.Dropped}
		}),
		TIState:    string(p.TIState),
		Terminal:   p.Terminal,
		LogDropped: p.LogDropped,
		More:       p.More,
	}
}

func toDAGs(dags []store.DAGSummary) []protocol.DAG {
	return convertSlice(dags, toDAG)
}

// toDAG is one DAG without its spec (getDAG adds it).
func toDAG(d store.DAGSummary) protocol.DAG {
	return protocol.DAG{DAGID: d.DAGID, Tasks: d.Tasks, Paused: d.Paused, SpecBytes: d.SpecBytes, UpdatedAt: d.UpdatedAt}
}

func toRun(r store.Run) protocol.Run {
	out := protocol.Run{ID: r.ID, DAGID: r.DAGID, State: string(r.State), Reason: string(r.Reason), Message: r.Message,
		QueuedAt: r.QueuedAt, StartDate: r.StartDate, EndDate: r.EndDate, RunType: r.RunType,
		LogicalDate: r.LogicalDate, DataIntervalStart: r.IntervalStart, DataIntervalEnd: r.IntervalEnd, Conf: r.Conf}
	if r.TaskCounts != nil {
		out.TaskCounts = make(map[string]int, len(r.TaskCounts))
		for s, n := range r.TaskCounts {
			out.TaskCounts[string(s)] = n
		}
	}
	return out
}

func toTaskInstance(t store.TaskInstance) protocol.TaskInstance {
	return protocol.TaskInstance{ID: t.ID, RunID: t.RunID, TaskID: t.TaskID, Ordinal: t.Ordinal, State: string(t.State),
		Reason: string(t.Reason), Message: t.Message, TryNumber: t.TryNumber, MaxTries: t.MaxTries,
		DispatchAttempts: t.DispatchAttempts, AttemptID: t.AttemptID, AgentID: t.AgentID, ExitCode: t.ExitCode,
		QueuedAt: t.QueuedAt, ClaimedAt: t.ClaimedAt, StartedAt: t.StartedAt, LastHeartbeatAt: t.LastHeartbeatAt,
		EndDate: t.EndDate, NextRetryAt: t.NextRetryAt, LogDropped: t.LogDropped, Late: toLateOutcome(t.Late)}
}

func toLateOutcome(l *store.LateOutcome) *protocol.LateOutcome {
	if l == nil {
		return nil
	}
	return &protocol.LateOutcome{Outcome: string(l.Outcome), TryNumber: l.TryNumber, AttemptID: l.AttemptID,
		Time: l.Time, Accepted: l.Accepted, Message: l.Message}
}

func toRunDetail(p store.RunPage) protocol.RunDetail {
	return protocol.RunDetail{Run: toRun(p.Run), TaskInstances: convertSlice(p.TaskInstances, toTaskInstance),
		NextCursor: p.NextCursor}
}

func toEventList(p store.EventPage) protocol.EventList {
	return protocol.EventList{
		Events: convertSlice(p.Events, func(e store.Event) protocol.Event {
			return protocol.Event{ID: e.ID, RunID: e.RunID, Time: e.Time, Kind: string(e.Kind), TIID: e.TIID, TaskID: e.TaskID,
				TryNumber: e.TryNumber, AttemptID: e.AttemptID, AgentID: e.AgentID, Message: e.Message}
		}),
		NextCursor: p.NextCursor,
	}
}

func toAgents(agents []store.Agent) []protocol.Agent {
	return convertSlice(agents, func(a store.Agent) protocol.Agent {
		return protocol.Agent{ID: a.ID, Name: a.Name, Tags: a.Tags, Capacity: a.Capacity, Running: a.Running,
			State: string(a.State), RegisteredAt: a.RegisteredAt, LastHeartbeatAt: a.LastHeartbeatAt}
	})
}

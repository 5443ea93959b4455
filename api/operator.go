package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// listAgents serves one page of agents, newest first (protocol.AgentList):
// the console polls it, so a page is bounded however many agents there are.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	before, ok := queryInt(w, r, "before", math.MaxInt64)
	if !ok {
		return
	}
	limit, ok := queryLimit(w, r, "limit", protocol.AgentsPageDefault, protocol.AgentsPageMax)
	if !ok {
		return
	}
	list, err := s.cfg.Store.ListAgents(r.Context(), before, limit+1)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out := protocol.AgentList{Agents: []protocol.Agent{}}
	if len(list) > limit {
		list = list[:limit]
		next := list[limit-1].ID
		out.NextCursor = &next
	}
	if agents := toAgents(list); agents != nil {
		out.Agents = agents
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) listDAGs(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.Store.ListDAGs(r.Context())
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	dags := toDAGs(list)
	if dags == nil {
		dags = []protocol.DAG{}
	}
	writeJSON(w, http.StatusOK, protocol.DAGList{DAGs: dags})
}

func (s *Server) getDAG(w http.ResponseWriter, r *http.Request) {
	spec, sum, err := s.cfg.Store.GetDAG(r.Context(), r.PathValue("dag_id"))
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	body, err := json.Marshal(spec)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out := toDAG(sum)
	out.Spec = body
	writeJSON(w, http.StatusOK, out)
}

// applyDAG parses and validates the YAML with package dag; an invalid spec
// is a 400 whose message lists every rule it broke, and nothing is stored.
func (s *Server) applyDAG(w http.ResponseWriter, r *http.Request) {
	var req protocol.ApplyDAGRequest
	if !decode(w, r, &req) {
		return
	}
	spec, err := dag.Parse([]byte(req.YAML))
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, err.Error())
		return
	}
	if !s.checkSecretsOn(w, spec) {
		return
	}
	result, err := s.cfg.Store.ApplyDAG(r.Context(), spec)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	warnings := s.tagWarnings(r, spec)
	s.log.Info("dag applied", "dag_id", spec.DAGID, "result", result, "tasks", len(spec.Tasks), "warnings", len(warnings), "actor", actorOf(r))
	writeJSON(w, http.StatusOK, protocol.ApplyDAGResponse{DAGID: spec.DAGID, Result: result, Warnings: warnings})
}

// offersAll reports whether an agent with these tags may run a task that
// requires tags: it offers every one (the claim's required_tags <@ tags).
func offersAll(agent, tags []string) bool {
	for _, t := range tags {
		if !slices.Contains(agent, t) {
			return false
		}
	}
	return true
}

// tagWarnings names each task of spec whose tags no single live agent
// (active within the agent-lost threshold, as dispatch-lost counts them)
// offers, with the tags no live agent offers at all. Agents may come
// later, so these are warnings, not a refusal; a failed read gives none.
func (s *Server) tagWarnings(r *http.Request, spec *dag.Spec) []string {
	if !slices.ContainsFunc(spec.Tasks, func(t dag.Task) bool { return len(t.Tags) > 0 }) {
		return nil
	}
	now, err := s.cfg.Store.Now(r.Context())
	var live [][]string
	if err == nil {
		live, err = s.cfg.Store.LiveAgentTags(r.Context(), now, s.cfg.Control.Thresholds().AgentLost)
	}
	if err != nil {
		s.log.Warn("dag tags not checked against the live agents", "dag_id", spec.DAGID, "err", err)
		return nil
	}
	offered := map[string]bool{}
	for _, tags := range live {
		for _, t := range tags {
			offered[t] = true
		}
	}
	var out []string
	for _, task := range spec.Tasks {
		if len(task.Tags) == 0 || slices.ContainsFunc(live, func(agent []string) bool { return offersAll(agent, task.Tags) }) {
			continue
		}
		var missing []string
		for _, t := range task.Tags {
			if !offered[t] {
				missing = append(missing, t)
			}
		}
		why := fmt.Sprintf("no live agent offers tags %v", missing)
		if len(missing) == 0 {
			why = fmt.Sprintf("no single live agent offers all of its tags %v", task.Tags)
		}
		out = append(out, fmt.Sprintf("dag %s task %s: tags %v: %s (%d live agents); it will wait in queued until one does, and dispatch_lost fails it after %s",
			spec.DAGID, task.ID, task.Tags, why, len(live), s.cfg.Control.Thresholds().DispatchLost))
	}
	return out
}

func (s *Server) pauseDAG(w http.ResponseWriter, r *http.Request)   { s.setPaused(w, r, true) }
func (s *Server) unpauseDAG(w http.ResponseWriter, r *http.Request) { s.setPaused(w, r, false) }

// setPaused pauses or unpauses the DAG in the path; a repeat is a no-op
// reported with changed false.
func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, paused bool) {
	dagID := r.PathValue("dag_id")
	changed, err := s.cfg.Store.SetPaused(r.Context(), dagID, paused)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Info("dag pause state set", "dag_id", dagID, "paused", paused, "changed", changed, "actor", actorOf(r))
	writeJSON(w, http.StatusOK, protocol.PauseDAGResponse{DAGID: dagID, Paused: paused, Changed: changed})
}

// nextSlots lists the DAG's next count (default 5, at most 1000) slots
// from dags.next_slot, or, before the schedules service computed it,
// from where it would start (the slot after the latest scheduled run, or
// the first slot).
func (s *Server) nextSlots(w http.ResponseWriter, r *http.Request) {
	count := 5
	if v := r.URL.Query().Get("count"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, fmt.Sprintf("count: %q must be an integer in 1..1000", v))
			return
		}
		count = n
	}
	d, err := s.cfg.Store.GetDAGSchedule(r.Context(), r.PathValue("dag_id"))
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	out := protocol.NextSlots{DAGID: d.Spec.DAGID, Schedule: d.Spec.Schedule, Paused: d.Paused, Slots: []protocol.ScheduleSlot{}}
	sl, err := d.Spec.Slots()
	if err != nil {
		s.writeStoreError(w, r, fmt.Errorf("dag %q: stored spec: %w", d.Spec.DAGID, err))
		return
	}
	if sl != nil {
		cur := sl.First()
		switch {
		case d.NextSlot != nil:
			cur = d.NextSlot.UTC()
		case d.LastSlot != nil && sl.Next(*d.LastSlot).After(cur):
			cur = sl.Next(*d.LastSlot)
		}
		for len(out.Slots) < count && !sl.Ended(cur) {
			end := sl.Next(cur)
			out.Slots = append(out.Slots, protocol.ScheduleSlot{LogicalDate: cur, DataIntervalStart: cur, DataIntervalEnd: end})
			cur = end
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// triggerRun queues a manual run; the optional body's conf is checked
// against the DAG's params (docs/params.md), a broken rule being a 400
// that names the DAG, the key and the rule.
func (s *Server) triggerRun(w http.ResponseWriter, r *http.Request) {
	var req protocol.TriggerRunRequest
	if !decodeOptional(w, r, &req) {
		return
	}
	run, err := s.cfg.Store.TriggerRunConf(r.Context(), r.PathValue("dag_id"), req.Conf)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Info("run triggered", "run_id", run.ID, "dag_id", run.DAGID, "conf_keys", len(run.Conf), "actor", actorOf(r))
	writeJSON(w, http.StatusCreated, toRun(run))
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	runState := state.Run(q.Get("state"))
	if runState != "" && !slices.Contains(state.RunStates(), runState) {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, fmt.Sprintf("state: %q must be one of %s",
			runState, strings.Join(state.Strings(state.RunStates()), ", ")))
		return
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, fmt.Sprintf("limit: %q must be an integer in 1..10000", v))
			return
		}
		limit = n
	}
	list, err := s.cfg.Store.ListRuns(r.Context(), runState, q.Get("dag_id"), limit)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	runs := convertSlice(list, toRun)
	if runs == nil {
		runs = []protocol.Run{}
	}
	writeJSON(w, http.StatusOK, protocol.RunList{Runs: runs})
}

// getRun serves a run with one page of its TIs in task id order:
// ?after=TASK (the task id of the last TI already read; absent: from the
// first) and ?limit=M (1..protocol.TIsPageMax, default
// protocol.TIsPageDefault).
func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run_id")
	if !ok {
		return
	}
	after := r.URL.Query().Get("after")
	if after != "" && !dag.ValidID(after) {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("query parameter after: %.60q is not a task id (the next_cursor of the previous page)", after))
		return
	}
	limit, ok := queryLimit(w, r, "limit", protocol.TIsPageDefault, protocol.TIsPageMax)
	if !ok {
		return
	}
	page, err := s.cfg.Store.GetRunPage(r.Context(), id, after, limit)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	detail := toRunDetail(page)
	s.explainQueued(r, &detail)
	writeJSON(w, http.StatusOK, detail)
}

// explainQueued gives each queued TI of the run that no live agent can
// take the reason no_matching_agent and the at-risk report's words (which
// tags are missing, and when dispatch-lost acts), so `runs show` and the
// run page say why it waits. It is computed at each read from the same
// report as GET /v1/at-risk?run_id=N, and stores nothing: the TI takes
// any agent that comes. A failed read leaves the reasons empty.
func (s *Server) explainQueued(r *http.Request, d *protocol.RunDetail) {
	if !slices.ContainsFunc(d.TaskInstances, func(ti protocol.TaskInstance) bool {
		return ti.State == string(state.TIQueued) && ti.Reason == ""
	}) {
		return
	}
	rep, err := s.cfg.Control.AtRisk(r.Context(), d.ID)
	if err != nil {
		s.log.Warn("queued reasons not computed", "run_id", d.ID, "err", err)
		return
	}
	for _, q := range rep.Queued {
		for i := range d.TaskInstances {
			if ti := &d.TaskInstances[i]; ti.ID == q.TIID && ti.State == string(state.TIQueued) && ti.Reason == "" {
				ti.Reason = string(state.ReasonNoMatchingAgent)
				ti.Message = fmt.Sprintf("%s; dispatch_lost fails it in %s unless such an agent comes", q.Outcome, q.TimeLeft.Round(time.Second))
			}
		}
	}
}

// runEvents serves one page of a run's timeline: ?after=ID (exclusive
// cursor, default 0) and ?limit=N (1..protocol.EventsPageMax, default
// protocol.EventsPageDefault). The reply's next_cursor is the after of the
// next page, null on the last one.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run_id")
	if !ok {
		return
	}
	after, ok := queryInt(w, r, "after", math.MaxInt64)
	if !ok {
		return
	}
	limit, ok := queryLimit(w, r, "limit", protocol.EventsPageDefault, protocol.EventsPageMax)
	if !ok {
		return
	}
	page, err := s.cfg.Store.RunEventsPage(r.Context(), id, after, limit)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toEventList(page))
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run_id")
	if !ok {
		return
	}
	run, err := s.cfg.Store.CancelRun(r.Context(), id, state.ReasonCancelled, "cancelled by "+actorOf(r))
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Info("run cancelled", "run_id", id, "actor", actorOf(r))
	writeJSON(w, http.StatusOK, toRun(run))
}

func (s *Server) readLogs(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run_id")
	if !ok {
		return
	}
	cur, try, ok := logCursor(w, r)
	if !ok {
		return
	}
	page, err := s.cfg.Store.ReadLogs(r.Context(), id, r.PathValue("task_id"), try, cur, 0)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	logs := toLogList(page)
	if logs.Lines == nil {
		logs.Lines = []protocol.StoredLogLine{}
	}
	writeJSON(w, http.StatusOK, logs)
}

// logCursor reads a log read's try filter and cursor: ?try=T (0 or absent:
// every try), ?after=SEQ and ?after_try=T, the (try, seq) of the last line
// the reader has. after_try defaults to try; without try, after needs it,
// since Seqs restart at 1 on every try.
func logCursor(w http.ResponseWriter, r *http.Request) (store.LogCursor, int, bool) {
	after, ok := queryInt(w, r, "after", math.MaxInt64)
	if !ok {
		return store.LogCursor{}, 0, false
	}
	try, ok := queryInt(w, r, "try", math.MaxInt32)
	if !ok {
		return store.LogCursor{}, 0, false
	}
	afterTry, ok := queryInt(w, r, "after_try", math.MaxInt32)
	if !ok {
		return store.LogCursor{}, 0, false
	}
	if r.URL.Query().Get("after_try") == "" {
		afterTry = try
	}
	if after > 0 && afterTry == 0 {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			"query parameter after_try: required with after when try is not given (a line's position is its try_number and seq)")
		return store.LogCursor{}, 0, false
	}
	return store.LogCursor{Try: int(afterTry), Seq: after}, int(try), true
}

// queryInt reads an optional integer query parameter in 0..maxN (0 when
// absent; maxN is the column's range, so the database never sees a value
// it cannot hold), writing a 400 naming it, the range and the value when
// it is not one.
func queryInt(w http.ResponseWriter, r *http.Request, name string, maxN int64) (int64, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxN {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("query parameter %s: %q must be an integer in 0..%d", name, v, maxN))
		return 0, false
	}
	return n, true
}

// queryOrdinal reads an optional cursor that is a task's place in its DAG
// (0..MaxInt32), -1 when absent (from the start), writing a 400 naming it
// when it is not one.
func queryOrdinal(w http.ResponseWriter, r *http.Request, name string) (int, bool) {
	if r.URL.Query().Get(name) == "" {
		return -1, true
	}
	n, ok := queryInt(w, r, name, math.MaxInt32)
	return int(n), ok
}

// queryLimit reads an optional page-size query parameter in 1..maxN (def
// when absent), writing a 400 naming it, the range and the value when it
// is not one.
func queryLimit(w http.ResponseWriter, r *http.Request, name string, def, maxN int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxN {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("query parameter %s: %q must be an integer in 1..%d", name, v, maxN))
		return 0, false
	}
	return n, true
}

var errNotMigrated = errors.New("database schema is not at the latest migration")

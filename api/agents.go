package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/vigil-sched/vigil/agenttoken"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/store"
)

// Bounds on agent-supplied values; tags: protocol.MaxAgentTags and
// protocol.MaxTagLen.
const (
	maxCapacity = 1024
	maxNameLen  = 200
	maxEntries  = 10000
)

func validateAttempt(field string, a protocol.Attempt) error {
	if a.TIID <= 0 {
		return fmt.Errorf("%s.ti_id: must be a positive integer", field)
	}
	if _, err := uuid.Parse(a.AttemptID); err != nil {
		return fmt.Errorf("%s.attempt_id: %q is not a UUID", field, a.AttemptID)
	}
	return nil
}

// agentRequest reads the {agent_id} path value and the JSON body of an
// agent endpoint, writing the 400 itself when either is malformed.
func agentRequest(w http.ResponseWriter, r *http.Request, body any) (int64, bool) {
	agentID, ok := pathID(w, r, "agent_id")
	if !ok || !decode(w, r, body) {
		return 0, false
	}
	return agentID, true
}

func validateRegister(req protocol.RegisterRequest) error {
	if req.Name == "" || len(req.Name) > maxNameLen {
		return fmt.Errorf("name: must be 1..%d characters", maxNameLen)
	}
	if req.Capacity < 1 || req.Capacity > maxCapacity {
		return fmt.Errorf("capacity: %d is outside 1..%d", req.Capacity, maxCapacity)
	}
	if len(req.Tags) > protocol.MaxAgentTags {
		return fmt.Errorf("tags: %d tags, more than the %d an agent may have", len(req.Tags), protocol.MaxAgentTags)
	}
	for i, t := range req.Tags {
		if t == "" {
			return fmt.Errorf("tags[%d]: must not be empty", i)
		}
		if len(t) > protocol.MaxTagLen {
			return fmt.Errorf("tags[%d]: %d bytes, more than the %d a tag may have", i, len(t), protocol.MaxTagLen)
		}
	}
	if len(req.InFlight) > maxEntries {
		return fmt.Errorf("in_flight: more than %d entries", maxEntries)
	}
	for i, a := range req.InFlight {
		if err := validateAttempt(fmt.Sprintf("in_flight[%d]", i), a.Attempt); err != nil {
			return err
		}
	}
	return nil
}

// validateClaim checks a claim body: slots within 0..maxCapacity, wait at
// most MaxClaimWait.
func validateClaim(req protocol.ClaimRequest) error {
	if req.Slots < 0 || req.Slots > maxCapacity {
		return fmt.Errorf("slots: %d is outside 0..%d", req.Slots, maxCapacity)
	}
	if req.Wait.D() > MaxClaimWait {
		return fmt.Errorf("wait: %s exceeds the %s maximum", req.Wait.D(), MaxClaimWait)
	}
	return nil
}

// validateHeartbeat checks a heartbeat body: at most maxEntries entries,
// each a well-formed attempt.
func validateHeartbeat(req protocol.HeartbeatRequest) error {
	if len(req.Entries) > maxEntries {
		return fmt.Errorf("entries: more than %d", maxEntries)
	}
	for i, e := range req.Entries {
		if err := validateAttempt(fmt.Sprintf("entries[%d]", i), e.Attempt); err != nil {
			return err
		}
	}
	return nil
}

// MaxLogLine is the most bytes of one log line the server stores: the
// honest agent splits longer lines (agent.maxLineBytes), and the server
// truncates any line still longer, whoever sent it, so one line can cost
// neither storage nor a log read more (docs/security.md, "Limits").
const MaxLogLine = 64 << 10

// truncatedMarker ends a line the server cut to MaxLogLine bytes; %d is
// how many bytes it dropped.
const truncatedMarker = " [vigil: line truncated by the server, %d bytes dropped]"

// truncateLogLine cuts line to at most MaxLogLine bytes, marker included,
// on a UTF-8 boundary; ok reports whether it cut.
func truncateLogLine(line string) (string, bool) {
	if len(line) <= MaxLogLine {
		return line, false
	}
	// The marker's length with the largest count it can hold.
	keep := MaxLogLine - len(fmt.Sprintf(truncatedMarker, len(line)))
	for keep > 0 && !utf8.RuneStart(line[keep]) {
		keep--
	}
	return line[:keep] + fmt.Sprintf(truncatedMarker, len(line)-keep), true
}

// validateLogs checks a log batch (attempt, positive seq, known stream,
// time set) and makes each line storable: PostgreSQL text holds neither
// NUL nor invalid UTF-8, so those become U+FFFD rather than reject the
// batch, and a line over MaxLogLine is truncated; truncated counts those.
func validateLogs(req *protocol.LogsRequest) (truncated int, err error) {
	for i, l := range req.Lines {
		err := validateAttempt(fmt.Sprintf("lines[%d]", i), l.Attempt)
		switch {
		case err != nil:
		case l.Seq <= 0:
			err = fmt.Errorf("lines[%d].seq: must be positive", i)
		case l.Stream != protocol.StreamStdout && l.Stream != protocol.StreamStderr && l.Stream != protocol.StreamSystem:
			err = fmt.Errorf("lines[%d].stream: %q must be stdout, stderr or system", i, l.Stream)
		case l.Time.IsZero():
			err = fmt.Errorf("lines[%d].time: required", i)
		case l.Dropped < 0 || (l.Dropped > 0 && l.Stream != protocol.StreamSystem):
			err = fmt.Errorf("lines[%d].dropped: %d must be 0, or positive on a system line (a gap marker)", i, l.Dropped)
		}
		if err != nil {
			return truncated, err
		}
		// Replace first: U+FFFD is longer than the byte it replaces.
		line, cut := truncateLogLine(strings.ReplaceAll(strings.ToValidUTF8(l.Line, "\uFFFD"), "\x00", "\uFFFD"))
		if cut {
			truncated++
		}
		req.Lines[i].Line = line
	}
	return truncated, nil
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var req protocol.RegisterRequest
	if !decode(w, r, &req) {
		return
	}
	if err := validateRegister(req); err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, err.Error())
		return
	}
	if scope := callerOf(r.Context()).scope; scope != nil {
		if tag, out := scope.Outside(req.Tags); out {
			s.log.Warn("agent registration refused: tag outside its token's", "name", req.Name, "tag", tag, "agent_token", scope.Name)
			writeError(w, http.StatusForbidden, protocol.CodeForbidden, scopeRefusal(scope, tag))
			return
		}
	}
	reg := fromRegister(req)
	// A name is held while its registration heartbeats: another one may
	// take it only once the holder would be reaped as lost.
	reg.Credential = r.Header.Get(protocol.HeaderAgentCredential)
	reg.StaleAfter = s.cfg.Control.Thresholds().AgentLost
	out, err := s.cfg.Store.Register(r.Context(), reg)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Info("agent registered", "agent_id", out.AgentID, "name", req.Name, "tags", req.Tags,
		"capacity", req.Capacity, "in_flight", len(req.InFlight), "terminate", len(out.Stops),
		"reconnect", reg.Credential != "" && reg.Credential == out.Credential)
	writeJSON(w, http.StatusOK, protocol.RegisterResponse{
		AgentID: out.AgentID, Credential: out.Credential, HeartbeatInterval: protocol.Duration(s.cfg.HeartbeatInterval),
		Terminate: toStopOrders(out.Stops), ServerTime: out.Now,
	})
}

// claim long-polls (docs/design.md §4 claim): each round is one claim
// statement that looks for work this agent can take and room for it and
// writes only when it takes a TI (store.LookAndClaim); an empty round
// waits, having written nothing, for a queue notification whose tag sets
// fit the agent's tags (or a 1 s poll) until the request's wait ends.
func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	var req protocol.ClaimRequest
	agentID, ok := agentRequest(w, r, &req)
	if !ok {
		return
	}
	if err := validateClaim(req); err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, err.Error())
		return
	}
	if !s.claimInScope(w, r, agentID) {
		return
	}
	var tags atomic.Pointer[[]string] // nil until the first look: wake on anything
	var wake <-chan struct{}
	if s.cfg.Listener != nil {
		ch, unsub := s.cfg.Listener.SubscribeFunc(store.ChanQueued, func(payload string) bool {
			return queuedFits(payload, tags.Load())
		})
		defer unsub()
		wake = ch
	}
	deadline := time.NewTimer(req.Wait.D())
	defer deadline.Stop()
	poll := time.NewTicker(claimPoll)
	defer poll.Stop()
	raced := 0 // consecutive empty claims after a look that found work
	for {
		c, tasks, err := s.lookAndClaim(r.Context(), agentID, req.Slots)
		if err != nil {
			s.writeStoreError(w, r, err)
			return
		}
		tags.Store(&c.Tags)
		if req.Slots == 0 {
			writeJSON(w, http.StatusOK, protocol.ClaimResponse{Tasks: []protocol.ClaimedTask{}})
			return
		}
		if c.Queued && c.Room > 0 {
			if len(tasks) > 0 {
				for _, t := range tasks {
					s.log.Debug("task instance claimed", "agent_id", agentID, "ti_id", t.TIID, "run_id", t.RunID,
						"task_id", t.TaskID, "try_number", t.TryNumber, "attempt_id", t.AttemptID)
				}
				out, err := s.resolveSecrets(r.Context(), agentID, toClaimedTasks(tasks), secretRefs(tasks))
				if err == nil {
					out, err = s.attachInputs(r.Context(), agentID, out, upstreamOf(tasks))
				}
				if err != nil {
					s.writeStoreError(w, r, err)
					return
				}
				writeJSON(w, http.StatusOK, protocol.ClaimResponse{Tasks: nonNilTasks(out)})
				return
			}
			// Another claim took or held the work between the look and
			// the claim; what it held but did not take is free once it
			// committed, so look again at once, a few times.
			if raced++; raced <= maxClaimRaces {
				continue
			}
		}
		raced = 0
		select {
		case <-r.Context().Done():
			return
		case <-deadline.C:
			writeJSON(w, http.StatusOK, protocol.ClaimResponse{Tasks: []protocol.ClaimedTask{}})
			return
		case <-s.draining:
			writeJSON(w, http.StatusOK, protocol.ClaimResponse{Tasks: []protocol.ClaimedTask{}})
			return
		case <-wake:
		case <-poll.C:
		}
	}
}

// lookAndClaim is one round of the claim long-poll within the bulk
// limit, one statement: with slots > 0 the claim, which reports what it
// looked at and writes nothing when it takes nothing
// (store.LookAndClaim); with slots == 0 only the read-only look.
func (s *Server) lookAndClaim(ctx context.Context, agentID int64, slots int) (store.Claimability, []store.ClaimedTask, error) {
	release, ok := s.acquireBulk(ctx)
	if !ok {
		return store.Claimability{}, nil, ctx.Err()
	}
	defer release()
	if slots == 0 {
		c, err := s.cfg.Store.Claimable(ctx, agentID)
		return c, nil, err
	}
	return s.cfg.Store.LookAndClaim(ctx, agentID, slots)
}

// scopeRefusal is the 403 message for a tag outside a scoped token's.
func scopeRefusal(scope *agenttoken.Entry, tag string) string {
	return fmt.Sprintf("tag %q is not among the tags of agent token %q (%s); register only those, or use a token that allows it",
		tag, scope.Name, strings.Join(scope.Tags, ", "))
}

// claimInScope refuses (403, written to w) a claim by a scoped token's
// agent whose registered tags are no longer all within the token's,
// after the agent tokens file was reread with fewer: a claim never hands
// it a TI that needs a tag outside them. The agent must register again,
// which the same check refuses. An unscoped caller costs nothing.
func (s *Server) claimInScope(w http.ResponseWriter, r *http.Request, agentID int64) bool {
	scope := callerOf(r.Context()).scope
	if scope == nil {
		return true
	}
	c, err := s.cfg.Store.Claimable(r.Context(), agentID)
	if err != nil {
		s.writeStoreError(w, r, err)
		return false
	}
	if tag, out := scope.Outside(c.Tags); out {
		s.log.Warn("claim refused: agent holds a tag outside its token's", "agent_id", agentID, "tag", tag, "agent_token", scope.Name)
		writeError(w, http.StatusForbidden, protocol.CodeForbidden, scopeRefusal(scope, tag))
		return false
	}
	return true
}

// Claim long-poll pacing: claimPoll is the safety-net look when no
// notification comes (notifications are hints, store.Listener);
// maxClaimRaces bounds the immediate retries after a claim lost its work
// to a concurrent one.
const (
	claimPoll     = time.Second
	maxClaimRaces = 3
)

// queuedFits reports whether a ChanQueued payload concerns an agent with
// tags: one of its tag sets fits them (store.TagsFit). An unreadable or
// empty payload, or tags not yet known (nil), always concern it.
func queuedFits(payload string, tags *[]string) bool {
	sets, ok := store.QueuedPayload(payload)
	if !ok || tags == nil {
		return true
	}
	for _, set := range sets {
		if store.TagsFit(set, *tags) {
			return true
		}
	}
	return false
}

func nonNilTasks(t []protocol.ClaimedTask) []protocol.ClaimedTask {
	if t == nil {
		return []protocol.ClaimedTask{}
	}
	return t
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req protocol.HeartbeatRequest
	agentID, ok := agentRequest(w, r, &req)
	if !ok {
		return
	}
	if err := validateHeartbeat(req); err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, err.Error())
		return
	}
	stops, now, err := s.cfg.Store.Heartbeat(r.Context(), agentID, fromHeartbeatEntries(req.Entries))
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.cfg.Metrics.HeartbeatsReceived.Inc()
	out := toStopOrders(stops)
	if out == nil {
		out = []protocol.StopOrder{}
	}
	writeJSON(w, http.StatusOK, protocol.HeartbeatResponse{Stop: out, ServerTime: now})
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	var req protocol.LogsRequest
	agentID, ok := agentRequest(w, r, &req)
	if !ok {
		return
	}
	truncated, err := validateLogs(&req)
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, err.Error())
		return
	}
	if truncated > 0 {
		s.cfg.Metrics.LogLinesTruncated.Add(float64(truncated))
		s.log.Warn("log lines truncated", "agent_id", agentID, "lines", truncated, "max_bytes", MaxLogLine)
	}
	out, err := s.cfg.Store.AppendLogs(r.Context(), agentID, fromLogLines(req.Lines))
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	if out.Dropped > 0 {
		s.cfg.Metrics.LogLinesDropped(out.Dropped)
		s.log.Warn("agent lost log lines: gap marker stored", "agent_id", agentID, "dropped", out.Dropped)
	}
	w.WriteHeader(http.StatusNoContent)
}

// deregister ends an agent that stopped (every agent calls it after its
// drain on SIGTERM; KiCI scaler-managed agents never come back), asked
// by the agent itself (its credential) or by an operator: its
// claimed-but-never-started TIs are requeued at
// once (dispatch_attempts+1) and its started ones fail with agent_lost
// (retries apply), without waiting out the agent-lost threshold.
func (s *Server) deregister(w http.ResponseWriter, r *http.Request) {
	agentID, ok := pathID(w, r, "agent_id")
	if !ok {
		return
	}
	running, err := s.cfg.Store.AgentRunning(r.Context(), agentID)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	reaps := make([]store.Reap, len(running))
	for i, c := range running {
		reaps[i] = reaper.LostAttempt(c, fmt.Sprintf("agent %d deregistered (it stopped)", agentID))
	}
	landed, err := s.cfg.Store.DeregisterAgent(r.Context(), agentID, reaps)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	for _, l := range landed {
		s.cfg.Metrics.Decide(string(l.EventKind))
		s.log.Info("scheduler decision", "decision", l.EventKind, "run_id", l.RunID, "ti_id", l.TIID,
			"task_id", l.TaskID, "try_number", l.TryNumber, "agent_id", agentID, "message", l.Message)
	}
	s.log.Info("agent deregistered", "agent_id", agentID, "running_handled", len(landed))
	w.WriteHeader(http.StatusNoContent)
}

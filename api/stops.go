package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/store"
)

// stopWatchPoll is how often a stop watch without a listener (or whose
// notification was lost) returns, so the agent heartbeats: notifications
// are hints, and the heartbeat is the stop order's real carrier.
const stopWatchPoll = 30 * time.Second

// stopWatch is an agent's long poll for stop orders (POST
// /v1/agents/{agent_id}/stops): it answers stop true as soon as a TI the
// agent holds is cancelled (store.ChanStop, notified by the cancel's
// transaction), so the agent heartbeats at once and gets its stop order
// within a moment, not at its next heartbeat. Otherwise it answers stop
// false when the wait (at most MaxClaimWait) ends.
func (s *Server) stopWatch(w http.ResponseWriter, r *http.Request) {
	var req protocol.StopWatchRequest
	agentID, ok := agentRequest(w, r, &req)
	if !ok {
		return
	}
	if req.Wait.D() > MaxClaimWait || req.Wait.D() < 0 {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("wait: %s is outside 0..%s", req.Wait.D(), MaxClaimWait))
		return
	}
	var wake <-chan struct{}
	if s.cfg.Listener != nil {
		me := strconv.FormatInt(agentID, 10)
		ch, unsub := s.cfg.Listener.SubscribeFunc(store.ChanStop, func(payload string) bool { return payload == me })
		defer unsub()
		wake = ch
	}
	deadline := time.NewTimer(min(req.Wait.D(), stopWatchPoll))
	defer deadline.Stop()
	select {
	case <-r.Context().Done():
	case <-deadline.C:
		writeJSON(w, http.StatusOK, protocol.StopWatchResponse{Stop: false})
	case <-wake:
		writeJSON(w, http.StatusOK, protocol.StopWatchResponse{Stop: true})
	}
}

package api_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// A stop watch answers stop true as soon as a run whose TI the agent
// holds is cancelled, long before its wait ends, and the heartbeat that
// follows carries the stop order; with nothing cancelled it waits its
// wait out and answers false. The watch is known to be listening (the
// listener counts its subscription) before the cancel.
func TestStopWatchWakesOnCancel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(wideDAG("watched", 1, ""))
	agentID := h.register("host-1", nil, 1)
	runID := h.trigger("watched")
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool { tasks = h.claim(agentID, 1, time.Second); return len(tasks) == 1 }, 10*time.Second, 10*time.Millisecond)
	path := fmt.Sprintf("/v1/agents/%d/stops", agentID)

	var idle protocol.StopWatchResponse
	code, e := h.call("POST", path, agentToken, protocol.StopWatchRequest{Wait: protocol.Duration(50 * time.Millisecond)}, &idle)
	require.Equal(t, 200, code, e.Message)
	assert.False(t, idle.Stop, "nothing cancelled: the wait ends")

	type reply struct {
		res  protocol.StopWatchResponse
		code int
		took time.Duration
	}
	done := make(chan reply, 1)
	before := h.lis.Subscribers(store.ChanStop)
	go func() {
		var r reply
		began := time.Now()
		r.code, _ = h.call("POST", path, agentToken, protocol.StopWatchRequest{Wait: protocol.Duration(5 * time.Second)}, &r.res)
		r.took = time.Since(began)
		done <- r
	}()
	require.Eventually(t, func() bool { return h.lis.Subscribers(store.ChanStop) > before }, 10*time.Second, time.Millisecond,
		"the watch subscribed")
	code, e = h.call("POST", fmt.Sprintf("/v1/runs/%d/cancel", runID), opToken, nil, nil)
	require.Equal(t, 200, code, e.Message)
	r := <-done
	require.Equal(t, 200, r.code)
	assert.True(t, r.res.Stop, "the cancel woke the watch")
	assert.Less(t, r.took, 5*time.Second, "before its wait ended")

	var hb protocol.HeartbeatResponse
	code, e = h.call("POST", fmt.Sprintf("/v1/agents/%d/heartbeat", agentID), agentToken,
		protocol.HeartbeatRequest{Entries: []protocol.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}}}, &hb)
	require.Equal(t, 200, code, e.Message)
	require.Len(t, hb.Stop, 1)
	assert.Equal(t, tasks[0].AttemptID, hb.Stop[0].AttemptID)
	assert.Equal(t, state.StopCancelled, hb.Stop[0].Reason)
}

package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// Found by the chaos suite (docs/reliability.md, the second 1,000-fault
// run): a task exited while the database was slow; its completion waited
// for the log flush and then timed out, and meanwhile the agent's
// heartbeats no longer listed the ended attempt, so its TI's heartbeat
// stamp aged from the exit and the agent-lost reaper failed it while the
// agent was still heartbeating. An ended attempt stays in every heartbeat
// until the server has its completion.
func TestHeartbeatsListAnEndedAttemptUntilItsCompletionLands(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	hold := make(chan struct{})
	f.holdBatch = hold
	srv := f.serve()
	a := startAgent(t, []string{srv.URL}, nil)
	task := f.enqueue(0, nil, "true")
	reporting := func(n int) func() bool {
		return func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			return len(a.reporting) == n && len(a.attempts) == 0
		}
	}
	require.Eventually(t, reporting(1), 5*time.Second, 5*time.Millisecond, "the task ended and its completion is held in flight")

	sent := f.heartbeatsAfter(func() { a.heartbeat(context.Background(), 0) })
	require.NotEmpty(t, sent)
	for _, hb := range sent {
		assert.Contains(t, hb.Entries, protocol.HeartbeatEntry{Attempt: task.Attempt, Started: true},
			"a heartbeat sent while the completion is in flight keeps the attempt alive")
	}

	close(hold)
	f.waitCompletion(task.AttemptID, 5*time.Second)
	require.Eventually(t, reporting(0), 5*time.Second, 5*time.Millisecond, "the server acknowledged the completion")
	sent = f.heartbeatsAfter(func() { a.heartbeat(context.Background(), 0) })
	require.NotEmpty(t, sent)
	last := sent[len(sent)-1] // built after the acknowledgement (heartbeats are serialised)
	assert.False(t, slices.ContainsFunc(last.Entries, func(e protocol.HeartbeatEntry) bool { return e.AttemptID == task.AttemptID }),
		"once the completion landed the attempt is no longer listed")
}

// A start is reported at once, before the completion, but that report
// lists only the attempts started since the last heartbeat: listing the
// whole agent rewrote every running TI's row per start. The periodic
// heartbeat still lists every attempt.
func TestStartReportListsOnlyNewStarts(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	a := startAgent(t, []string{srv.URL}, func(c *Config) {
		c.Capacity = 3
		c.HeartbeatInterval = time.Hour // no periodic heartbeat covers a start here
	})
	gate := filepath.Join(t.TempDir(), "gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o600) })
	wait := sh(`while [ ! -e "$GATE" ]; do sleep 0.02; done`)
	env := map[string]string{"GATE": gate}
	first, second := f.enqueue(0, env, wait...), f.enqueue(0, env, wait...)
	require.Eventually(t, func() bool { return f.isStarted(first.AttemptID) && f.isStarted(second.AttemptID) },
		5*time.Second, 5*time.Millisecond)

	var third protocol.ClaimedTask
	sent := f.heartbeatsAfter(func() {
		third = f.enqueue(0, env, wait...)
		require.Eventually(t, func() bool { return f.isStarted(third.AttemptID) }, 5*time.Second, 5*time.Millisecond)
	})
	require.Len(t, sent, 1, "one start report")
	assert.Equal(t, []protocol.HeartbeatEntry{{Attempt: third.Attempt, Started: true}}, sent[0].Entries,
		"the start report lists the new start only")

	sent = f.heartbeatsAfter(func() { a.heartbeat(context.Background(), 0) })
	require.Len(t, sent, 1)
	assert.ElementsMatch(t, []protocol.HeartbeatEntry{
		{Attempt: first.Attempt, Started: true}, {Attempt: second.Attempt, Started: true}, {Attempt: third.Attempt, Started: true},
	}, sent[0].Entries, "the periodic heartbeat lists every attempt")

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	for _, task := range []protocol.ClaimedTask{first, second, third} {
		assert.Equal(t, state.OutcomeSuccess, f.waitCompletion(task.AttemptID, 5*time.Second).Outcome)
	}
}

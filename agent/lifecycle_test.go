package agent

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/internal/proctest"
	"github.com/vigil-sched/vigil/state"
)

func TestDrainWaitsForRunningTask(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	a := startAgent(t, []string{srv.URL}, nil)
	task := f.enqueue(0, nil, sh("sleep 0.5; echo done")...)
	require.Eventually(t, func() bool { return f.isStarted(task.AttemptID) }, 5*time.Second, 10*time.Millisecond)

	require.NoError(t, a.stop(), "a clean drain returns nil")
	c, ok := f.completion(task.AttemptID)
	require.True(t, ok, "the completion is delivered during the drain")
	assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	assert.True(t, containsLine(f.lines(task.AttemptID), "stdout", "done"))
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Len(t, f.deregs, 1, "a stopped agent deregisters once, after its drain")
}

func TestDrainTimeoutKillsProcessGroups(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	a := startAgent(t, []string{srv.URL}, func(c *Config) { c.DrainTimeout = 300 * time.Millisecond })
	pidfile := filepath.Join(t.TempDir(), "pid")
	task := f.enqueue(0, map[string]string{"PIDFILE": pidfile}, sh(`sleep 300 & echo $! > "$PIDFILE"; wait`)...)
	grandchild := proctest.PidFromFile(t, pidfile)

	err := a.stop()
	require.ErrorIs(t, err, ErrDrainTimeout)
	assert.True(t, eventuallyGone(grandchild), "the drain deadline kills the whole group")
	c, ok := f.completion(task.AttemptID)
	require.True(t, ok)
	assert.Equal(t, state.OutcomeFailed, c.Outcome)
	assert.Equal(t, state.FailureAgentShutdown, c.Failure, "the drain's kill is agent_shutdown, not a signal")
	assert.Empty(t, c.Signal)
	assert.Contains(t, c.Error, "drain timeout")
}

func eventuallyGone(pid int) bool {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if proctest.Gone(pid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func TestFailoverBetweenServers(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	first, second := f.serve(), f.serve()
	a := startAgent(t, []string{deadURL(t), first.URL, second.URL}, nil)

	one := f.enqueue(0, nil, sh("echo one")...)
	f.waitCompletion(one.AttemptID, 5*time.Second)
	a.mu.Lock()
	assert.Equal(t, 1, a.st.server, "the dead first URL was skipped")
	a.mu.Unlock()

	long := f.enqueue(0, nil, sh("sleep 0.8; echo two")...)
	require.Eventually(t, func() bool { return f.isStarted(long.AttemptID) }, 5*time.Second, 10*time.Millisecond)
	first.Close() // the replica in use goes away; the agent moves to the next
	c := f.waitCompletion(long.AttemptID, 5*time.Second)
	assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	a.mu.Lock()
	assert.Equal(t, 2, a.st.server)
	a.mu.Unlock()
	assert.True(t, containsLine(f.lines(long.AttemptID), "stdout", "two"))
}

func TestRejectedTokenFailsRun(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	a, err := New(Config{Servers: []string{srv.URL}, Token: "wrong", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = a.Run(ctx)
	var ae *APIError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 401, ae.Status)
	assert.Equal(t, protocol.CodeUnauthorized, ae.Code)
}

package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestCompletionFailureReasons completes one single-task run per kind of
// failure and checks the TI's state, reason and message and the run's
// reason, which the CHECK constraints of migration 003 must accept.
// Before migration 003 a drain kill, a signal and a failed start were
// all recorded as exit_code with no exit code.
func TestCompletionFailureReasons(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.DB(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.AcquireFence(ctx, 1, "test"))
	agentID := storetest.Agent(t, st, store.Registration{Name: "w", Capacity: 10})
	drain := func() {
		t.Helper()
		for {
			res, err := st.ScheduleDirty(ctx, 1, 100)
			require.NoError(t, err)
			if res.Runs == 0 {
				return
			}
		}
	}
	// run applies a one-task DAG with retries, runs it to a claim and a
	// started heartbeat, and completes it with c.
	run := func(name string, retries int, c store.Completion) (store.RunDetail, state.TI) {
		t.Helper()
		// A long retry delay keeps a retry from being claimed by a later call.
		spec, err := dag.Parse(fmt.Appendf(nil, "dag_id: %s\ntasks:\n  - id: t\n    retries: %d\n    retry_delay: 1h\n    command: [\"true\"]\n", name, retries))
		require.NoError(t, err)
		_, err = st.ApplyDAG(ctx, spec)
		require.NoError(t, err)
		r, err := st.TriggerRun(ctx, name)
		require.NoError(t, err)
		drain()
		tasks, err := st.Claim(ctx, agentID, 1)
		require.NoError(t, err)
		require.Len(t, tasks, 1)
		require.Equal(t, r.ID, tasks[0].RunID, "claimed this run's TI")
		_, _, err = st.Heartbeat(ctx, agentID, []store.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}})
		require.NoError(t, err)
		c.Attempt = tasks[0].Attempt
		newState, late, err := st.Complete(ctx, agentID, c)
		require.NoError(t, err)
		require.False(t, late)
		drain()
		d, err := st.GetRun(ctx, r.ID)
		require.NoError(t, err)
		require.Len(t, d.TaskInstances, 1)
		return d, newState
	}
	code := 3
	for _, tc := range []struct {
		name    string
		c       store.Completion
		reason  state.Reason
		message string
	}{
		{"exit3", store.Completion{Outcome: state.OutcomeFailed, ExitCode: &code, Error: "exit status 3"},
			state.ReasonExitCode, "try 1 exited with code 3; no retries left"},
		{"drained", store.Completion{Outcome: state.OutcomeFailed, Failure: state.FailureAgentShutdown,
			Error: "killed: agent shut down and its drain timeout 5s expired"},
			state.ReasonAgentShutdown, "try 1 was killed because its agent shut down; no retries left"},
		{"signalled", store.Completion{Outcome: state.OutcomeFailed, Failure: state.FailureSignal, Signal: "SIGKILL",
			Error: "killed by signal SIGKILL"},
			state.ReasonSignal, "try 1 was killed by signal SIGKILL; no retries left"},
		{"unstartable", store.Completion{Outcome: state.OutcomeFailed, Failure: state.FailureStartFailed,
			Error: `exec: "nope": executable file not found in $PATH`},
			state.ReasonStartFailed, `try 1 could not start: exec: "nope": executable file not found in $PATH; no retries left`},
		{"old-agent", store.Completion{Outcome: state.OutcomeFailed, Error: "signal: killed"},
			state.ReasonExitCode, "try 1 failed: signal: killed; no retries left"},
	} {
		d, newState := run(tc.name, 0, tc.c)
		ti := d.TaskInstances[0]
		assert.Equal(t, state.TIFailed, newState, tc.name)
		assert.Equal(t, state.TIFailed, ti.State, tc.name)
		assert.Equal(t, tc.reason, ti.Reason, tc.name)
		assert.Equal(t, tc.message, ti.Message, tc.name)
		assert.Equal(t, state.RunFailed, d.State, tc.name)
		assert.Equal(t, tc.reason, d.Reason, "%s: the run fails with its TI's reason", tc.name)
	}
	// Each new reason spends a try of the budget like exit_code does.
	for _, f := range []state.Failure{state.FailureStartFailed, state.FailureAgentShutdown, state.FailureSignal} {
		c := store.Completion{Outcome: state.OutcomeFailed, Failure: f, Error: "x"}
		if f == state.FailureSignal {
			c.Signal = "SIGTERM"
		}
		d, newState := run("retry-"+string(f), 1, c)
		assert.Equal(t, state.TIUpForRetry, newState, "%s with a retry left", f)
		assert.Equal(t, state.Reason(f), d.TaskInstances[0].Reason, "%s: the reason is kept while up_for_retry", f)
		assert.Contains(t, d.TaskInstances[0].Message, "retry 1 of 1", "%s", f)
	}
}

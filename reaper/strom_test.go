package reaper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

func (e *env) agentState(id int64) string {
	var s string
	require.NoError(e.t, e.raw.QueryRow(e.ctx, `SELECT state FROM agents WHERE id = $1`, id).Scan(&s))
	return s
}

// Strøm phase 1: silent agents become inactive; a heartbeat reactivates
// them; an agent heartbeating in time is never touched.
func TestSilentAgentsAreMarkedInactiveAndReactivated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentInactive)
	silent := e.register("silent", nil, 1)
	alive := e.register("alive", nil, 1)
	e.exec(`UPDATE agents SET last_heartbeat_at = now() - interval '5 minutes' WHERE id = $1`, silent)
	now := e.dbNow()

	rep := e.sweepAt(now, reaper.Term{Epoch: epoch, GraceStart: now.Add(-10 * time.Second)})
	assert.Empty(t, rep.Candidates, "held back during the post-leadership grace")

	rep = e.sweepAt(now, e.oldTerm())
	require.Len(t, rep.Candidates, 1)
	assert.Equal(t, "agent_inactive", rep.Candidates[0].Decision)
	assert.Equal(t, silent, *rep.Candidates[0].AgentID)
	assert.Equal(t, "inactive", e.agentState(silent))
	assert.Equal(t, "active", e.agentState(alive), "an agent that heartbeats in time is never marked inactive")
	assert.Equal(t, 1.0, e.decisions("agent_inactive"))

	_, _, err := e.store.Heartbeat(e.ctx, silent, nil)
	require.NoError(t, err)
	assert.Equal(t, "active", e.agentState(silent), "its next heartbeat reactivates it")

	agents, err := e.store.ListAgents(e.ctx, 0, 1000)
	require.NoError(t, err)
	assert.Len(t, agents, 2)
}

// Strøm phase 2: the server-side backstop fails a TI its agent did not
// kill in time; retries apply.
func TestExecutionTimeoutBackstop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperExecutionTimeout)
	e.apply(`dag_id: slow
tasks:
  - id: bounded
    command: ["true"]
    execution_timeout: 10s
    retries: 1
  - id: unbounded
    command: ["true"]
`)
	runID := e.trigger("slow")
	agent := e.register("w", nil, 4)
	tasks := e.claim(agent, 2)
	require.Len(t, tasks, 2)
	e.started(agent, tasks...)
	start := e.ti(runID, "bounded").StartedAt
	require.NotNil(t, start)
	// Keep the agent looking alive so only the backstop can act.
	e.exec(`UPDATE task_instances SET last_heartbeat_at = now() + interval '1 day' WHERE run_id = $1`, runID)

	rep := e.sweepAt(start.Add(10*time.Second+reaper.DefaultAgentLost-time.Second), e.oldTerm())
	assert.Empty(t, rep.Candidates, "the agent still has time to enforce its own timeout")

	rep = e.sweepAt(start.Add(10*time.Second+reaper.DefaultAgentLost+time.Second), e.oldTerm())
	require.Len(t, rep.Candidates, 1, "a TI without execution_timeout is never a candidate")
	ti := e.ti(runID, "bounded")
	assert.Equal(t, state.TIUpForRetry, ti.State)
	assert.Equal(t, state.ReasonExecutionTimeout, ti.Reason)
	assert.Equal(t, state.TIRunning, e.ti(runID, "unbounded").State)
	assert.Equal(t, 1.0, e.decisions("execution_timeout"))

	stops, _, err := e.store.Heartbeat(e.ctx, agent, []store.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}, {Attempt: tasks[1].Attempt, Started: true}})
	require.NoError(t, err)
	require.Len(t, stops, 1, "only the timed-out attempt is stopped")
	assert.Equal(t, state.StopReaped, stops[0].Reason)
}

// Strøm phase 3: a run past its timeout is cancelled with run_timeout and
// its agents told to stop; runs without a timeout, or already terminal,
// are untouched.
func TestRunTimeoutCancelsTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperRunTimeout)
	e.apply("dag_id: bounded\ntimeout: 1m\ntasks:\n  - id: a\n    command: [\"true\"]\n  - id: b\n    command: [\"true\"]\n    depends_on: [a]\n")
	e.apply("dag_id: free\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	timed := e.trigger("bounded")
	free := e.trigger("free")
	agent := e.register("w", nil, 4)
	tasks := e.claim(agent, 2)
	e.started(agent, tasks...)

	rep := e.sweepAt(e.dbNow().Add(50*time.Second), e.oldTerm())
	assert.Empty(t, rep.Candidates)

	rep = e.sweepAt(e.dbNow().Add(2*time.Minute), e.oldTerm())
	require.Len(t, rep.Candidates, 1)
	assert.Equal(t, timed, rep.Candidates[0].RunID)
	assert.Contains(t, rep.Candidates[0].Message, "run exceeded its timeout of 1m0s (", "a running run")
	assert.Contains(t, rep.Candidates[0].Message, " since it started)", "a running run")
	run := e.run(timed)
	assert.Equal(t, state.RunCancelled, run.State)
	assert.Equal(t, state.ReasonRunTimeout, run.Reason)
	for _, ti := range run.TaskInstances {
		assert.Equal(t, state.TICancelled, ti.State)
		assert.Equal(t, state.ReasonRunTimeout, ti.Reason)
	}
	assert.Equal(t, state.RunRunning, e.run(free).State)
	assert.Contains(t, e.eventKinds(timed), "run_cancelled")
	assert.Equal(t, 1.0, e.decisions("run_timeout"))

	var timedAttempt store.Attempt
	for _, task := range tasks {
		if task.RunID == timed {
			timedAttempt = task.Attempt
		}
	}
	stops, _, err := e.store.Heartbeat(e.ctx, agent, []store.HeartbeatEntry{{Attempt: timedAttempt, Started: true}})
	require.NoError(t, err)
	require.Len(t, stops, 1)
	assert.Equal(t, state.StopCancelled, stops[0].Reason)

	rep = e.sweepAt(e.dbNow().Add(time.Hour), e.oldTerm())
	assert.Empty(t, rep.Candidates, "a terminal run is never timed out again")
}

package reaper_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

const raceRounds = 20

// race runs a and b at the same instant, a after a random delay of up to
// jitter so that both orders occur over the rounds.
func race(jitter time.Duration, a, b func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	delay := time.Duration(rand.Int64N(int64(jitter) + 1))
	for i, f := range []func(){a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if i == 0 {
				time.Sleep(delay)
			}
			f()
		}()
	}
	close(start)
	wg.Wait()
}

func manyTasks(id string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dag_id: %s\nmax_active_tasks: 1000\ntasks:\n", id)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - id: t%02d\n    command: [\"true\"]\n", i)
	}
	return b.String()
}

// sweepNow sweeps with the clock at the database's now, as production does.
func (e *env) sweepNow() reaper.Report {
	e.clock.Set(e.dbNow())
	rep, err := e.reapers.Sweep(e.ctx, e.oldTerm())
	require.NoError(e.t, err)
	return rep
}

// A heartbeat racing the agent-lost reap: exactly one wins every time.
func TestRaceHeartbeatVersusAgentLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	e.apply(manyTasks("hb", raceRounds))
	runID := e.trigger("hb")
	agent := e.register("w", nil, 1000)
	tasks := e.claim(agent, raceRounds)
	require.Len(t, tasks, raceRounds)
	e.started(agent, tasks...)
	wins := map[string]int{}
	for _, task := range tasks {
		e.ageHeartbeat("id = $1", 10*time.Minute, task.TIID)
		var stops []store.StopOrder
		var hbErr error
		race(2*time.Millisecond,
			func() {
				stops, _, hbErr = e.store.Heartbeat(e.ctx, agent, []store.HeartbeatEntry{{Attempt: task.Attempt, Started: true}})
			},
			func() { e.sweepNow() },
		)
		require.NoError(t, hbErr)
		ti := e.ti(runID, task.TaskID)
		heartbeatWon := len(stops) == 0
		reaped := ti.State != state.TIRunning
		assert.NotEqual(t, heartbeatWon, reaped, "exactly one side wins (%s: state %s, stops %v)", task.TaskID, ti.State, stops)
		if reaped {
			assert.Equal(t, state.ReasonAgentLost, ti.Reason)
			wins["reaper"]++
		} else {
			wins["heartbeat"]++
		}
	}
	t.Logf("wins over %d rounds: %v", raceRounds, wins)
	assert.Equal(t, float64(wins["reaper"]), e.decisions("agent_lost"), "a decision is counted only when its write landed")
}

// A completion racing the agent-lost reap: exactly one wins every time.
func TestRaceCompletionVersusAgentLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	e.apply(manyTasks("done", raceRounds))
	runID := e.trigger("done")
	agent := e.register("w", nil, 1000)
	tasks := e.claim(agent, raceRounds)
	require.Len(t, tasks, raceRounds)
	e.started(agent, tasks...)
	wins := map[string]int{}
	exit := 1
	for _, task := range tasks {
		e.ageHeartbeat("id = $1", 10*time.Minute, task.TIID)
		var completeErr error
		race(6*time.Millisecond,
			func() {
				_, _, completeErr = e.store.Complete(e.ctx, agent, store.Completion{
					Attempt: task.Attempt, Outcome: state.OutcomeFailed, ExitCode: &exit})
			},
			func() { e.sweepNow() },
		)
		ti := e.ti(runID, task.TaskID)
		require.Equal(t, state.TIFailed, ti.State)
		var stale *store.StaleAttemptError
		switch {
		case completeErr == nil:
			assert.Equal(t, state.ReasonExitCode, ti.Reason, "the completion won, so the reaper wrote nothing")
			wins["completion"]++
		case errors.As(completeErr, &stale):
			assert.Equal(t, state.ReasonAgentLost, ti.Reason, "the reaper won, so the completion was refused")
			wins["reaper"]++
		default:
			t.Fatalf("unexpected completion error: %v", completeErr)
		}
	}
	t.Logf("wins over %d rounds: %v", raceRounds, wins)
}

// A claim racing the dispatch-lost reap: exactly one wins every time.
func TestRaceClaimVersusDispatchLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperDispatchLost)
	e.apply("dag_id: tagged\ntasks:\n  - id: x\n    command: [\"true\"]\n    tags: [special]\n")
	agent := e.register("special-box", []string{"special"}, 1000)
	wins := map[string]int{}
	for i := 0; i < raceRounds; i++ {
		runID := e.trigger("tagged")
		// The TI has waited 10 minutes and the only matching agent looks
		// gone (no heartbeat for an hour): a dispatch-lost candidate, until
		// the agent's claim shows it is alive.
		e.exec(`UPDATE task_instances SET queued_at = now() - interval '10 minutes' WHERE run_id = $1`, runID)
		e.exec(`UPDATE agents SET last_heartbeat_at = now() - interval '1 hour' WHERE id = $1`, agent)
		var claimed []store.ClaimedTask
		var claimErr error
		race(2*time.Millisecond,
			func() { claimed, claimErr = e.store.Claim(e.ctx, agent, 1) },
			func() { e.sweepNow() },
		)
		require.NoError(t, claimErr)
		ti := e.ti(runID, "x")
		switch {
		case len(claimed) == 1:
			assert.Equal(t, state.TIRunning, ti.State)
			wins["claim"]++
		case ti.State == state.TIFailed:
			assert.Equal(t, state.ReasonDispatchLost, ti.Reason)
			wins["reaper"]++
		default:
			t.Fatalf("neither side won: state %s, claimed %d", ti.State, len(claimed))
		}
		// Finish claimed work so capacity and the next round stay clean.
		for _, c := range claimed {
			_, _, err := e.store.Complete(e.ctx, agent, store.Completion{Attempt: c.Attempt, Outcome: state.OutcomeSuccess})
			require.NoError(t, err)
		}
	}
	t.Logf("wins over %d rounds: %v", raceRounds, wins)
}

// A success racing the agent-lost reap is never lost: either it lands
// first, or it is accepted as a late completion of the same attempt.
func TestRaceSuccessVersusAgentLostIsNeverLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	e.apply(manyTasks("ok", raceRounds))
	runID := e.trigger("ok")
	agent := e.register("w", nil, 1000)
	tasks := e.claim(agent, raceRounds)
	require.Len(t, tasks, raceRounds)
	e.started(agent, tasks...)
	late := 0
	for _, task := range tasks {
		e.ageHeartbeat("id = $1", 10*time.Minute, task.TIID)
		var completeErr error
		var wasLate bool
		race(6*time.Millisecond,
			func() {
				_, wasLate, completeErr = e.store.Complete(e.ctx, agent, store.Completion{Attempt: task.Attempt, Outcome: state.OutcomeSuccess})
			},
			func() { e.sweepNow() },
		)
		require.NoError(t, completeErr, task.TaskID)
		assert.Equal(t, state.TISuccess, e.ti(runID, task.TaskID).State)
		if wasLate {
			late++
		}
	}
	t.Logf("accepted late after the reap: %d of %d", late, raceRounds)
}

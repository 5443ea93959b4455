package api_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

func wideDAG(id string, n int, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dag_id: %s\nmax_active_tasks: 1000\ntasks:\n", id)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - id: t%03d\n    command: [\"true\"]\n%s", i, extra)
	}
	return b.String()
}

// Two agents claim concurrently from many goroutines; FOR UPDATE SKIP
// LOCKED must hand every queued TI to exactly one of them.
func TestClaimRaceNeverSharesATaskInstance(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	const n = 60
	h.applyDAG(wideDAG("wide", n, ""))
	runID := h.trigger("wide")
	for i := 0; i < n; i++ {
		h.waitTI(runID, fmt.Sprintf("t%03d", i), state.TIQueued, 10*time.Second)
	}
	agents := []int64{h.register("a1", nil, 1000), h.register("a2", nil, 1000)}
	var mu sync.Mutex
	owner := map[int64]int64{}
	dups := 0
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(agentID int64) {
			defer wg.Done()
			for {
				tasks := h.claim(agentID, 2, 0)
				if len(tasks) == 0 {
					return
				}
				mu.Lock()
				for _, task := range tasks {
					if _, seen := owner[task.TIID]; seen {
						dups++
					}
					owner[task.TIID] = agentID
				}
				mu.Unlock()
			}
		}(agents[g%2])
	}
	wg.Wait()
	assert.Zero(t, dups, "a TI was claimed twice")
	assert.Len(t, owner, n, "every queued TI claimed exactly once")
	perAgent := map[int64]int{}
	for _, a := range owner {
		perAgent[a]++
	}
	t.Logf("claims per agent: %v", perAgent) // any split is correct; only uniqueness is an invariant
	for _, ti := range h.run(runID).TaskInstances {
		assert.Equal(t, state.TIRunning, ti.State)
		assert.Equal(t, 1, ti.TryNumber)
		assert.NotNil(t, ti.ClaimedAt)
		assert.Equal(t, ti.ClaimedAt, ti.LastHeartbeatAt, "a claim is the first heartbeat")
	}
}

func TestClaimRespectsTagsAndCapacity(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(`dag_id: tagged
tasks:
  - id: gpu
    command: ["true"]
    tags: [gpu, linux]
  - id: any1
    command: ["true"]
  - id: any2
    command: ["true"]
`)
	runID := h.trigger("tagged")
	for _, id := range []string{"gpu", "any1", "any2"} {
		h.waitTI(runID, id, state.TIQueued, 10*time.Second)
	}
	plain := h.register("plain", []string{"linux"}, 1)
	got := h.claim(plain, 5, 0)
	require.Len(t, got, 1, "capacity 1 bounds the claim")
	assert.NotEqual(t, "gpu", got[0].TaskID)
	assert.Empty(t, h.claim(plain, 5, 0), "capacity is used up while the first TI runs")

	gpu := h.register("gpu-box", []string{"gpu", "linux", "extra"}, 10)
	got = h.claim(gpu, 5, 0)
	ids := []string{}
	for _, task := range got {
		ids = append(ids, task.TaskID)
	}
	assert.Len(t, ids, 2, "the gpu TI and the untagged TI the first agent left")
	assert.Contains(t, ids, "gpu", "required_tags <@ agent tags")
}

func TestLongPollClaimWakesWhenWorkIsQueued(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(wideDAG("one", 1, ""))
	agentID := h.register("poller", nil, 1)
	got := make(chan []protocol.ClaimedTask, 1)
	start := time.Now()
	go func() { got <- h.claim(agentID, 1, 20*time.Second) }()
	time.Sleep(200 * time.Millisecond)
	h.trigger("one")
	select {
	case tasks := <-got:
		require.Len(t, tasks, 1)
		assert.Less(t, time.Since(start), 10*time.Second, "the long poll returned when work appeared, not at its deadline")
	case <-time.After(25 * time.Second):
		t.Fatal("long poll never returned")
	}
}

func TestRetriesUntilSuccessThenBudgetExhausted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(`dag_id: retrying
tasks:
  - id: flaky
    command: ["false"]
    retries: 2
    retry_delay: 100ms
  - id: after
    depends_on: [flaky]
    command: ["true"]
`)
	agentID := h.register("worker", nil, 4)
	runID := h.trigger("retrying")
	for try := 1; try <= 3; try++ {
		var tasks []protocol.ClaimedTask
		require.Eventually(t, func() bool { tasks = h.claim(agentID, 1, time.Second); return len(tasks) == 1 },
			10*time.Second, 10*time.Millisecond)
		require.Equal(t, "flaky", tasks[0].TaskID)
		require.Equal(t, try, tasks[0].TryNumber)
		outcome := state.OutcomeFailed
		if try == 3 {
			outcome = state.OutcomeSuccess
		}
		code, e := h.complete(agentID, tasks[0], outcome, map[bool]int{true: 0, false: 1}[try == 3])
		require.Equal(t, 200, code, e.Message)
		if try < 3 {
			ti := h.ti(runID, "flaky")
			assert.Equal(t, state.TIUpForRetry, ti.State)
			assert.Equal(t, state.ReasonExitCode, ti.Reason)
			assert.NotNil(t, ti.NextRetryAt)
		}
	}
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool { tasks = h.claim(agentID, 1, time.Second); return len(tasks) == 1 },
		10*time.Second, 10*time.Millisecond)
	require.Equal(t, "after", tasks[0].TaskID)
	code, _ := h.complete(agentID, tasks[0], state.OutcomeSuccess, 0)
	require.Equal(t, 200, code)
	run := h.waitRun(runID, 10*time.Second)
	assert.Equal(t, state.RunSuccess, run.State)
	assert.Equal(t, 3, h.ti(runID, "flaky").TryNumber)

	// Budget exhausted: retries 2 means three tries, then failed.
	runID = h.trigger("retrying")
	for try := 1; try <= 3; try++ {
		require.Eventually(t, func() bool { tasks = h.claim(agentID, 1, time.Second); return len(tasks) == 1 },
			10*time.Second, 10*time.Millisecond)
		code, _ := h.complete(agentID, tasks[0], state.OutcomeFailed, 7)
		require.Equal(t, 200, code)
	}
	run = h.waitRun(runID, 10*time.Second)
	assert.Equal(t, state.RunFailed, run.State)
	assert.Equal(t, state.ReasonExitCode, run.Reason)
	ti := h.ti(runID, "flaky")
	assert.Equal(t, state.TIFailed, ti.State)
	assert.Equal(t, 3, ti.TryNumber)
	require.NotNil(t, ti.ExitCode)
	assert.Equal(t, 7, *ti.ExitCode)
	assert.Equal(t, state.TIUpstreamFailed, h.ti(runID, "after").State)
}

func TestUpstreamFailedPropagatesAndRunFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(`dag_id: cascade
tasks:
  - id: a
    command: ["false"]
  - id: b
    depends_on: [a]
    command: ["true"]
  - id: c
    depends_on: [b]
    command: ["true"]
  - id: d
    command: ["true"]
  - id: e
    depends_on: [d, c]
    command: ["true"]
  - id: f
    depends_on: [d]
    command: ["true"]
`)
	agentID := h.register("worker", nil, 10)
	runID := h.trigger("cascade")
	done := map[string]bool{}
	deadline := time.Now().Add(15 * time.Second)
	for !(done["a"] && done["d"] && done["f"]) && time.Now().Before(deadline) {
		for _, task := range h.claim(agentID, 10, 200*time.Millisecond) {
			outcome, exit := state.OutcomeSuccess, 0
			if task.TaskID == "a" {
				outcome, exit = state.OutcomeFailed, 1
			}
			code, _ := h.complete(agentID, task, outcome, exit)
			require.Equal(t, 200, code)
			done[task.TaskID] = true
		}
	}
	run := h.waitRun(runID, 10*time.Second)
	assert.Equal(t, state.RunFailed, run.State)
	assert.Equal(t, state.ReasonExitCode, run.Reason)
	assert.Contains(t, run.Message, "task a failed")
	want := map[string]state.TI{"a": state.TIFailed, "b": state.TIUpstreamFailed, "c": state.TIUpstreamFailed,
		"d": state.TISuccess, "e": state.TIUpstreamFailed, "f": state.TISuccess}
	for _, ti := range run.TaskInstances {
		assert.Equal(t, want[ti.TaskID], ti.State, "task %s", ti.TaskID)
		if ti.State == state.TIUpstreamFailed {
			assert.Equal(t, state.ReasonUpstreamFailed, ti.Reason)
			assert.NotNil(t, ti.EndDate)
		}
	}
	assert.Contains(t, h.ti(runID, "e").Message, "c upstream_failed")
}

func TestStaleAttemptIsRejectedWith409(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(`dag_id: stale
tasks:
  - id: only
    command: ["false"]
    retries: 1
`)
	a1 := h.register("one", nil, 1)
	a2 := h.register("two", nil, 1)
	runID := h.trigger("stale")
	var first []protocol.ClaimedTask
	require.Eventually(t, func() bool { first = h.claim(a1, 1, time.Second); return len(first) == 1 }, 10*time.Second, 10*time.Millisecond)
	code, _ := h.complete(a1, first[0], state.OutcomeFailed, 1)
	require.Equal(t, 200, code)

	// A duplicate completion of the same attempt is stale.
	code, e := h.complete(a1, first[0], state.OutcomeSuccess, 0)
	assert.Equal(t, 409, code)
	assert.Equal(t, protocol.CodeStaleAttempt, e.Code)

	var second []protocol.ClaimedTask
	require.Eventually(t, func() bool { second = h.claim(a2, 1, time.Second); return len(second) == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.NotEqual(t, first[0].AttemptID, second[0].AttemptID, "every claim mints a new attempt_id")
	assert.Equal(t, 2, second[0].TryNumber)

	// The old attempt can neither complete nor heartbeat the new one.
	code, e = h.complete(a1, first[0], state.OutcomeSuccess, 0)
	assert.Equal(t, 409, code)
	assert.Equal(t, protocol.CodeStaleAttempt, e.Code)
	assert.Contains(t, e.Message, "superseded")
	var hb protocol.HeartbeatResponse
	code, _ = h.call("POST", fmt.Sprintf("/v1/agents/%d/heartbeat", a1), agentToken,
		protocol.HeartbeatRequest{Entries: []protocol.HeartbeatEntry{{Attempt: first[0].Attempt, Started: true}}}, &hb)
	require.Equal(t, 200, code)
	require.Len(t, hb.Stop, 1)
	assert.Equal(t, state.StopSuperseded, hb.Stop[0].Reason)

	code, _ = h.complete(a2, second[0], state.OutcomeSuccess, 0)
	assert.Equal(t, 200, code)
	assert.Equal(t, state.RunSuccess, h.waitRun(runID, 10*time.Second).State)
}

func TestAuthRejections(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(wideDAG("auth", 1, ""))
	owner := h.register("owner", nil, 1)
	thief := h.register("thief", nil, 1)
	runID := h.trigger("auth")
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool { tasks = h.claim(owner, 1, time.Second); return len(tasks) == 1 }, 10*time.Second, 10*time.Millisecond)

	cases := []struct {
		name, method, path, token string
		body                      any
		code                      int
		errCode                   string
	}{
		{"no token", "GET", "/v1/runs", "", nil, 401, protocol.CodeUnauthorized},
		{"wrong token", "GET", "/v1/runs", "nope", nil, 401, protocol.CodeUnauthorized},
		{"agent token on operator endpoint", "GET", "/v1/runs", agentToken, nil, 403, protocol.CodeForbidden},
		{"agent token cannot cancel", "POST", fmt.Sprintf("/v1/runs/%d/cancel", runID), agentToken, nil, 403, protocol.CodeForbidden},
		{"operator token on agent endpoint", "POST", "/v1/agents/register", opToken,
			protocol.RegisterRequest{Name: "x", Capacity: 1}, 403, protocol.CodeForbidden},
		{"no token on agent endpoint", "POST", fmt.Sprintf("/v1/agents/%d/heartbeat", owner), "",
			protocol.HeartbeatRequest{}, 401, protocol.CodeUnauthorized},
		{"another agent's completion", "POST", fmt.Sprintf("/v1/agents/%d/complete", thief), agentToken,
			protocol.CompleteRequest{Attempt: tasks[0].Attempt, Outcome: "success"}, 403, protocol.CodeForbidden},
		{"another agent's logs", "POST", fmt.Sprintf("/v1/agents/%d/logs", thief), agentToken,
			protocol.LogsRequest{Lines: []protocol.LogLine{{Attempt: tasks[0].Attempt, Seq: 1, Stream: "stdout", Time: time.Now(), Line: "forged"}}},
			403, protocol.CodeForbidden},
	}
	for _, c := range cases {
		code, e := h.call(c.method, c.path, c.token, c.body, nil)
		assert.Equal(t, c.code, code, c.name)
		assert.Equal(t, c.errCode, e.Code, c.name)
		assert.NotEmpty(t, e.Message, c.name)
	}

	// A thief's heartbeat does not refresh the owner's attempt: it is told to stop.
	var hb protocol.HeartbeatResponse
	code, _ := h.call("POST", fmt.Sprintf("/v1/agents/%d/heartbeat", thief), agentToken,
		protocol.HeartbeatRequest{Entries: []protocol.HeartbeatEntry{{Attempt: tasks[0].Attempt}}}, &hb)
	require.Equal(t, 200, code)
	require.Len(t, hb.Stop, 1)
	assert.Equal(t, state.TIRunning, h.ti(runID, "t000").State, "the owner's attempt is untouched")

	// Open endpoints need no token.
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/monitor/health"} {
		code, _ := h.call("GET", path, "", nil, nil)
		assert.Equal(t, 200, code, path)
	}
}

func TestBadInputNamesTheField(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	// Agent endpoints check the credential first: the bodies below are
	// sent as a registered agent, so only the body is at fault.
	a := fmt.Sprintf("/v1/agents/%d", h.register("bad-input", nil, 1))
	cases := []struct {
		path, token string
		body        any
		want        string
	}{
		{"/v1/agents/register", agentToken, protocol.RegisterRequest{Name: "x", Capacity: 0}, "capacity"},
		{"/v1/agents/register", agentToken, protocol.RegisterRequest{Capacity: 1}, "name"},
		{a + "/complete", agentToken, protocol.CompleteRequest{Attempt: protocol.Attempt{TIID: 1, AttemptID: "nope"}, Outcome: "success"}, "attempt_id"},
		{a + "/complete", agentToken, map[string]any{"ti_id": 1, "attempt_id": "7b0a3c1e-9f0e-4c43-8f5e-9a0d3c6b1e2f", "outcome": "maybe"}, "outcome"},
		{a + "/claim", agentToken, map[string]any{"slots": 1, "wait": "5m"}, "wait"},
		{a + "/claim", agentToken, map[string]any{"slots": 1, "bogus": true}, "bogus"},
		{"/v1/agents/abc/claim", agentToken, protocol.ClaimRequest{}, "agent_id"},
		{"/v1/dags", opToken, protocol.ApplyDAGRequest{YAML: "dag_id: x\ntasks:\n  - id: a\n    command: []\n"}, "command"},
	}
	for _, c := range cases {
		code, e := h.call("POST", c.path, c.token, c.body, nil)
		assert.Equal(t, 400, code, "%s %v", c.path, c.body)
		assert.Equal(t, protocol.CodeBadRequest, e.Code)
		assert.Contains(t, e.Message, c.want, "%s: %s", c.path, e.Message)
	}
	_, err := h.store.ListDAGs(context.Background())
	require.NoError(t, err)
	dags, _ := h.store.ListDAGs(context.Background())
	assert.Empty(t, dags, "an invalid spec stores nothing")
}

func TestCancelRunStopsItsAttempts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(wideDAG("cancel", 2, ""))
	agentID := h.register("w", nil, 1)
	runID := h.trigger("cancel")
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool { tasks = h.claim(agentID, 1, time.Second); return len(tasks) == 1 }, 10*time.Second, 10*time.Millisecond)
	var run protocol.Run
	code, _ := h.call("POST", fmt.Sprintf("/v1/runs/%d/cancel", runID), opToken, nil, &run)
	require.Equal(t, 200, code)
	assert.Equal(t, "cancelled", run.State)
	var hb protocol.HeartbeatResponse
	code, _ = h.call("POST", fmt.Sprintf("/v1/agents/%d/heartbeat", agentID), agentToken,
		protocol.HeartbeatRequest{Entries: []protocol.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}}}, &hb)
	require.Equal(t, 200, code)
	require.Len(t, hb.Stop, 1)
	assert.Equal(t, state.StopCancelled, hb.Stop[0].Reason)
	for _, ti := range h.run(runID).TaskInstances {
		assert.Equal(t, state.TICancelled, ti.State)
		assert.Equal(t, state.ReasonCancelled, ti.Reason)
	}
	code, e := h.call("POST", fmt.Sprintf("/v1/runs/%d/cancel", runID), opToken, nil, nil)
	assert.Equal(t, 409, code)
	assert.Contains(t, e.Message, "already cancelled")
}

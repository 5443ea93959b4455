package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/store/storetest"
)

// Agents attached to a Pro leader that freezes (SIGSTOP:
// requests hang on open connections, nothing is refused) fail over fast
// enough that the new leader's reapers never fail their live task. The
// timing is the tightest validation allows: election TTL 3s, heartbeat 1s,
// agent-lost 7s (> 3s + 2×1s + 1s = 6s; the 4s of the field report is now
// refused at startup). The agents' claim long poll is 30s, parked on the
// frozen leader. The leader stays stopped past its TTL, past the new
// leader's grace (7s from when it started leading) and until the run has
// ended; SIGCONT comes at the end. Before the fix the agents waited a
// fixed 15s before trying their next --server URL, and the new leader
// failed the running task agent_lost.
func TestProAgentsSurviveFrozenLeader(t *testing.T) {
	t.Parallel()
	const (
		ttl       = 3 * time.Second
		agentLost = 7 * time.Second
	)
	etcd := etcdtest.Start(t)
	dbURL := storetest.DB(t)
	rs := startReplicas(t, 3, dbURL, etcd, "--election-ttl", ttl.String(), "--agent-lost-threshold", agentLost.String())
	var lead *replica
	waitFor(t, 20*time.Second, func() bool {
		l, n := leaderOf(rs)
		lead = l
		return n == 1
	}, "exactly one leader")
	t.Cleanup(func() { lead.p.signal(syscall.SIGCONT) }) // before the harness stops it
	servers := []string{lead.url}
	var others []*replica
	for _, r := range rs {
		if r != lead {
			servers = append(servers, r.url)
			others = append(others, r)
		}
	}
	a1 := startAgent(t, servers, agentToken, "frozen-a1", "--claim-wait", "30s")
	a2 := startAgent(t, servers, agentToken, "frozen-a2", "--claim-wait", "30s")
	agentID(t, a1, 30*time.Second)
	agentID(t, a2, 30*time.Second)

	// Two long tasks, one per agent (capacity 4 each, so either agent may
	// take both; what matters is that live work spans the freeze), then a
	// short one after them.
	spec := writeDAG(t, t.TempDir(), "spans", `
dag_id: spans
tasks:
  - id: long1
    command: ["sh", "-c", "for i in $(seq 1 20); do echo long1 $i; sleep 1; done"]
  - id: long2
    command: ["sh", "-c", "for i in $(seq 1 20); do echo long2 $i; sleep 1; done"]
  - id: after
    depends_on: [long1, long2]
    command: ["sh", "-c", "echo after"]
`)
	env := []string{"VIGIL_SERVER=" + others[0].url, "VIGIL_TOKEN=" + operatorToken}
	require.Equal(t, 0, runVigil(t, env, "dags", "apply", spec).Code)
	r := runVigil(t, env, "runs", "trigger", "spans", "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var run protocol.Run
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &run))
	// Polled over HTTP without a log line per poll, so that a failure's
	// output shows the processes' logs rather than hundreds of polls.
	runPath := fmt.Sprintf("/v1/runs/%d", run.ID)
	getRun := func() protocol.RunDetail {
		var d protocol.RunDetail
		require.NoError(t, tryGetJSONAt(others[0].url, runPath, &d))
		return d
	}
	waitFor(t, 30*time.Second, func() bool {
		d := getRun()
		started := 0
		for _, ti := range d.TaskInstances {
			if ti.State == "running" && ti.StartedAt != nil {
				started++
			}
		}
		return started == 2
	}, "both long tasks running")

	frozen := time.Now()
	lead.p.signal(syscall.SIGSTOP)
	var next *replica
	waitFor(t, 15*time.Second, func() bool {
		l, n := leaderOf(others)
		next = l
		return n == 1
	}, "a new leader")
	t.Logf("SIGSTOP %s: %s leads after %s (TTL %s)", lead.id, next.id, time.Since(frozen).Round(time.Millisecond), ttl)

	var d protocol.RunDetail
	deadline := time.Now().Add(60 * time.Second)
	for d = getRun(); d.State != "success" && d.State != "failed" && d.State != "cancelled"; d = getRun() {
		if time.Now().After(deadline) {
			t.Fatalf("the run has not ended 60s after the freeze (%s leads):\n%s", next.id, describeRun(t, others[0].url, d))
		}
		time.Sleep(100 * time.Millisecond)
	}
	stoppedFor := time.Since(frozen)
	t.Logf("the run ended %s after the freeze; %s is still stopped", stoppedFor.Round(time.Millisecond), lead.id)
	assert.Greater(t, stoppedFor, ttl+agentLost, "the new leader's grace ended while the old leader was still frozen")
	assertUntouchedByFailover(t, env, d)
	for _, a := range []*proc{a1, a2} {
		assert.False(t, a.exited(), "%s still runs", a.name)
		var regs []any
		for _, rec := range jsonLogLines(a.logPath) {
			if rec["msg"] == "registered" {
				regs = append(regs, rec["server"])
			}
		}
		require.GreaterOrEqual(t, len(regs), 2, "%s registered again after the freeze", a.name)
		assert.NotEqual(t, lead.url, regs[len(regs)-1], "%s moved to another replica", a.name)
	}
	lead.p.signal(syscall.SIGCONT)
}

// describeRun is a failure message's account of run d as replica base
// sees it: the run, each TI's state, try, agent and reason, the agents,
// and the run's events, one line each.
func describeRun(t *testing.T, base string, d protocol.RunDetail) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "run %d: %s\n", d.ID, d.State)
	for _, ti := range d.TaskInstances {
		agent := "-"
		if ti.AgentID != nil {
			agent = fmt.Sprint(*ti.AgentID)
		}
		fmt.Fprintf(&b, "  ti %s: %s try %d agent %s reason %q %s\n", ti.TaskID, ti.State, ti.TryNumber, agent, ti.Reason, ti.Message)
	}
	var agents protocol.AgentList
	if err := tryGetJSONAt(base, "/v1/agents", &agents); err != nil {
		fmt.Fprintf(&b, "agents: %v\n", err)
	}
	for _, a := range agents.Agents {
		fmt.Fprintf(&b, "  agent %d %s: %s, last heartbeat %v\n", a.ID, a.Name, a.State, a.LastHeartbeatAt)
	}
	var events protocol.EventList
	if err := tryGetJSONAt(base, fmt.Sprintf("/v1/runs/%d/events", d.ID), &events); err != nil {
		fmt.Fprintf(&b, "events: %v\n", err)
	}
	for _, e := range events.Events {
		fmt.Fprintf(&b, "  event %s %s %s\n", e.Time.Format("15:04:05.000"), e.Kind, e.Message)
	}
	return b.String()
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/store/storetest"
)

// replica is one `vigil server` process.
type replica struct {
	id  string
	url string
	p   *proc
}

// health reads a replica's /monitor/health; ok is false when it does not
// answer (killed, starting).
func (r *replica) health() (api.HealthReport, bool) {
	var rep api.HealthReport
	c := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := c.Get(r.url + "/monitor/health")
	if err != nil {
		return rep, false
	}
	defer resp.Body.Close()
	return rep, json.NewDecoder(resp.Body).Decode(&rep) == nil
}

// startReplicas starts n Pro replicas on one database and one etcd.
func startReplicas(t *testing.T, n int, dbURL string, etcd []string, extra ...string) []*replica {
	t.Helper()
	var out []*replica
	for i := 1; i <= n; i++ {
		out = append(out, startReplica(t, fmt.Sprintf("r%d", i), dbURL, etcd, nil, extra...))
	}
	for _, r := range out {
		waitFor(t, readyTimeout, func() bool { _, ok := r.health(); return ok }, r.id+" serving")
	}
	return out
}

// startReplica starts one Pro replica with id and env (KEY=VALUE) on a
// free port, with the flags of startReplicas plus extra, without waiting
// for it to serve. Its agent-lost threshold, 7s, is valid up to an election
// TTL of 3s with the 1s heartbeat (> TTL + 2×1s + 1s, see
// reaper.Thresholds.ValidateTiming).
func startReplica(t *testing.T, id, dbURL string, etcd, env []string, extra ...string) *replica {
	t.Helper()
	return startReplicaBin(t, vigilBin, id, dbURL, etcd, env, extra...)
}

// startReplicaBin is startReplica with another vigil binary, bin.
func startReplicaBin(t *testing.T, bin, id, dbURL string, etcd, env []string, extra ...string) *replica {
	t.Helper()
	port := freePort(t)
	args := append([]string{"server", "--database-url", dbURL, "--etcd-endpoints", strings.Join(etcd, ","),
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--replica-id", id,
		"--agent-token", agentToken, "--operator-token", operatorToken, "--log-format", "json",
		"--election-ttl", "2s", "--tick-interval", "200ms", "--heartbeat-interval", "1s",
		"--agent-lost-threshold", "7s", "--sweep-interval", "250ms"}, extra...)
	logPath := filepath.Join(t.TempDir(), "server-"+id+".log")
	printLogTail(t, "server "+id, logPath)
	return &replica{id: id, url: fmt.Sprintf("http://127.0.0.1:%d", port), p: startProcBin(t, bin, "server "+id, logPath, args, env)}
}

// waitOneLeader waits up to 20 s until exactly one of rs reports leading
// and returns it.
func waitOneLeader(t *testing.T, rs []*replica) *replica {
	t.Helper()
	var lead *replica
	waitFor(t, 20*time.Second, func() bool {
		l, n := leaderOf(rs)
		lead = l
		return n == 1
	}, "exactly one leader")
	return lead
}

// leaderOf returns the replica that reports leading, if exactly one does.
func leaderOf(rs []*replica) (*replica, int) {
	var l *replica
	n := 0
	for _, r := range rs {
		if h, ok := r.health(); ok && h.Leader != nil && h.Leader.Leading {
			l = r
			n++
		}
	}
	return l, n
}

// docs/design.md §1 and §8: kill -9 the leader of three real replicas
// mid-run; another takes over, the agents fail over, nothing is reaped
// wrongly and the run succeeds.
func TestProLeaderKilledMidRun(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	dbURL := storetest.DB(t)
	rs := startReplicas(t, 3, dbURL, etcd)
	lead := waitOneLeader(t, rs)
	t.Logf("leader: %s", lead.id)

	// Both agents talk to the leader first, then to the others.
	servers := []string{lead.url}
	for _, r := range rs {
		if r != lead {
			servers = append(servers, r.url)
		}
	}
	a1 := startAgent(t, servers, agentToken, "pro-a1")
	a2 := startAgent(t, servers, agentToken, "pro-a2")
	agentID(t, a1, 30*time.Second)
	agentID(t, a2, 30*time.Second)

	dags := t.TempDir()
	chain := writeDAG(t, dags, "chain", `
dag_id: chain
tasks:
  - id: first
    command: ["sh", "-c", "for i in 1 2 3 4 5 6; do echo first $i; sleep 0.5; done"]
  - id: second
    depends_on: [first]
    command: ["sh", "-c", "for i in 1 2 3 4 5 6; do echo second $i; sleep 0.5; done"]
  - id: third
    depends_on: [second]
    command: ["sh", "-c", "echo done"]
`)
	env := []string{"VIGIL_SERVER=" + rs[0].url, "VIGIL_TOKEN=" + operatorToken}
	if rs[0] == lead {
		env[0] = "VIGIL_SERVER=" + rs[1].url
	}
	r := runVigil(t, env, "dags", "apply", chain)
	require.Equal(t, 0, r.Code, r.Stderr)
	r = runVigil(t, env, "runs", "trigger", "chain", "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var run protocol.Run
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &run))

	follower := rs[0]
	if follower == lead {
		follower = rs[1]
	}
	getRun := func() protocol.RunDetail {
		var d protocol.RunDetail
		resp := runVigil(t, []string{"VIGIL_SERVER=" + follower.url, "VIGIL_TOKEN=" + operatorToken},
			"runs", "show", fmt.Sprint(run.ID), "-o", "json")
		require.Equal(t, 0, resp.Code, resp.Stderr)
		require.NoError(t, json.Unmarshal([]byte(resp.Stdout), &d))
		return d
	}
	waitFor(t, 30*time.Second, func() bool {
		d := getRun()
		return len(d.TaskInstances) > 0 && d.TaskInstances[0].State == "running" && d.TaskInstances[0].StartedAt != nil
	}, "first task running")

	killed := time.Now()
	lead.p.signal(syscall.SIGKILL)
	var next *replica
	waitFor(t, 10*time.Second, func() bool {
		l, n := leaderOf(rs)
		next = l
		return n == 1 && l != lead
	}, "a new leader")
	failover := time.Since(killed)
	t.Logf("kill -9 %s: %s took over after %s (TTL 2s)", lead.id, next.id, failover.Round(time.Millisecond))
	assert.Less(t, failover, 3*time.Second+500*time.Millisecond, "another replica leads within TTL + 1 s (plus polling)")

	var d protocol.RunDetail
	waitFor(t, 60*time.Second, func() bool {
		d = getRun()
		return d.State == "success" || d.State == "failed" || d.State == "cancelled"
	}, "the run ends")
	assertUntouchedByFailover(t, []string{"VIGIL_SERVER=" + next.url, "VIGIL_TOKEN=" + operatorToken}, d)
	// The agents whose first server died failed over to another replica.
	for _, a := range []*proc{a1, a2} {
		assert.False(t, a.exited(), "%s still runs", a.name)
		assert.Contains(t, readFile(t, a.logPath), "control plane link lost", "%s noticed the dead replica", a.name)
	}
}

// Resign on SIGTERM hands leadership over in well under a second.
func TestProResignHandover(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	rs := startReplicas(t, 2, storetest.DB(t), etcd)
	lead := waitOneLeader(t, rs)
	stopped := time.Now()
	lead.p.signal(syscall.SIGTERM)
	waitFor(t, 5*time.Second, func() bool {
		l, n := leaderOf(rs)
		return n == 1 && l != lead
	}, "the other replica leads")
	handover := time.Since(stopped)
	t.Logf("SIGTERM %s: handover in %s", lead.id, handover.Round(time.Millisecond))
	assert.Less(t, handover, time.Second)
	assert.Equal(t, 0, lead.p.waitExit(t, 30*time.Second), "a clean exit")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// assertUntouchedByFailover checks that run d succeeded with every task on
// its first try and that its timeline (read through the CLI with env) has
// no reap decision: a failover cost the run nothing.
func assertUntouchedByFailover(t *testing.T, env []string, d protocol.RunDetail) {
	t.Helper()
	assert.Equal(t, "success", d.State)
	for _, ti := range d.TaskInstances {
		assert.Equal(t, "success", ti.State, ti.TaskID)
		assert.Equal(t, 1, ti.TryNumber, "%s was not reaped or retried", ti.TaskID)
	}
	resp := runVigil(t, env, "runs", "events", fmt.Sprint(d.ID), "-o", "json")
	require.Equal(t, 0, resp.Code, resp.Stderr)
	var list protocol.EventList // the API's shape (GET /v1/runs/{id}/events)
	require.NoError(t, json.Unmarshal([]byte(resp.Stdout), &list))
	for _, e := range list.Events {
		switch e.Kind {
		case "agent_lost", "agent_lost_requeued", "dispatch_lost", "orphan_reaped", "execution_timeout":
			t.Errorf("a reap decision across the failover: %+v", e)
		}
	}
}

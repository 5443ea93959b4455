package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// TestKilledAgentTakesItsTaskTreeWithIt SIGKILLs an agent whose task has
// started a child, a grandchild and a process that ignores SIGTERM. Each
// task runs under `vigil __supervise`, which notices its agent's death and
// kills the task's process group: within kill-grace + 1 s of the kill no
// process of that task is left (the SIGTERM-ignoring one falls to the
// SIGKILL after the grace). The try is then reaped agent_lost and the
// retry runs alone on the other agent. Before the supervisor, the whole
// tree lived on beside the retry.
func TestKilledAgentTakesItsTaskTreeWithIt(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	pidDir := t.TempDir()
	writeDAG(t, dags, "tree", fmt.Sprintf(`
dag_id: tree
tasks:
  - id: grow
    retries: 1
    env:
      PIDDIR: %q
    command:
      - sh
      - -c
      - |
        put() { echo "$2" > "$PIDDIR/$1.tmp" && mv "$PIDDIR/$1.tmp" "$PIDDIR/$1"; }
        if [ "$VIGIL_TRY_NUMBER" != 1 ]; then
          put "try-$VIGIL_TRY_NUMBER" $$
          echo "try $VIGIL_TRY_NUMBER runs"
          exit 0
        fi
        (trap "" TERM; exec sleep 300) &
        put stubborn $!
        sh -c 'sleep 300 & echo $! > "$PIDDIR/grandchild.tmp" && mv "$PIDDIR/grandchild.tmp" "$PIDDIR/grandchild"; sleep 300' &
        put child $!
        put leader $$
        wait
`, pidDir))
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 0, Extra: shortRecovery})
	agents := map[int64]*proc{}
	for _, name := range []string{"tree-a", "tree-b"} {
		a := startAgent(t, []string{lite.URL}, agentToken, name, "--capacity", "1", "--kill-grace", killGrace.String())
		agents[agentID(t, a, 30*time.Second)] = a
	}
	require.Len(t, agents, 2)

	run, code := triggerJSON(t, lite, "tree", false)
	require.Equal(t, 0, code)
	ti := waitTI(t, lite, run.ID, "grow", 30*time.Second, "running with started_at", func(ti protocol.TaskInstance) bool {
		return ti.State == "running" && ti.StartedAt != nil && ti.AgentID != nil
	})
	victim := agents[*ti.AgentID]
	require.NotNil(t, victim, "try 1 runs on one of our agents")
	tree := map[string]int{}
	for _, name := range []string{"leader", "stubborn", "child", "grandchild"} {
		tree[name] = readPid(t, filepath.Join(pidDir, name), 10*time.Second)
		require.True(t, pidAlive(tree[name]), "%s (pid %d) runs before the kill", name, tree[name])
	}
	t.Logf("try 1 runs on %s with process tree %v", victim.name, tree)

	killedAt := time.Now()
	victim.kill(t)
	deadline := killedAt.Add(killGrace + time.Second)
	for name, pid := range tree {
		for pidAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		assert.False(t, pidAlive(pid), "%s (pid %d) still alive %s after kill -9 of its agent (kill-grace %s)",
			name, pid, time.Since(killedAt).Round(time.Millisecond), killGrace)
	}
	t.Logf("the task tree was gone %s after kill -9 of %s (kill-grace %s)",
		time.Since(killedAt).Round(time.Millisecond), victim.name, killGrace)
	assert.Empty(t, leftAfter(victim, deadline), "no process of the killed agent or its task is left within kill-grace + 1 s")

	try2 := readPid(t, filepath.Join(pidDir, "try-2"), 30*time.Second)
	for name, pid := range tree {
		assert.False(t, pidAlive(pid), "try 1's %s (pid %d) runs beside the retry (pid %d)", name, pid, try2)
	}
	d := waitRunState(t, lite, run.ID, "success", 30*time.Second)
	ti = taskInstance(t, d, "grow")
	assert.Equal(t, 2, ti.TryNumber, "the retry succeeded")
	if assert.NotNil(t, ti.AgentID) {
		assert.NotSame(t, victim, agents[*ti.AgentID], "the retry ran on the other agent")
	}
	lost := 0
	for _, e := range runEvents(t, lite, run.ID) {
		if e.Kind == "agent_lost" {
			lost++
		}
	}
	assert.Equal(t, 1, lost, "try 1 was reaped agent_lost once")
}

// leftAfter waits until no live process carries p's marks (p, its tasks
// and their supervisors) or deadline passes, and returns those still left.
func leftAfter(p *proc, deadline time.Time) []int {
	for {
		var live []int
		for _, pid := range markedPids(p.marks...) {
			if pidAlive(pid) {
				live = append(live, pid)
			}
		}
		if len(live) == 0 || time.Now().After(deadline) {
			return live
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/agent/supervisor"
	"github.com/vigil-sched/vigil/api/protocol"
)

// TestKilledAgentTakesItsTaskTreeWithIt SIGKILLs an agent whose task has
// started a child, a grandchild and a process that ignores SIGTERM. Each
// task runs under vigil-supervise, installed beside vigil (the task's
// parent is checked), which notices its agent's death and
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
        put supervisor "$(tr '\0' ' ' < /proc/$PPID/cmdline)"
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
	small := filepath.Join(filepath.Dir(vigilBin), supervisor.ProgramName)
	assert.True(t, strings.HasPrefix(readFile(t, filepath.Join(pidDir, "supervisor")), small+" --parent-pid "),
		"the task runs under %s", small)
	assert.Equal(t, []any{small, nil}, supervisorLogged(t, victim), "the agent logged the supervisor it uses")

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

// TestLoneVigilSupervisesTasksItself runs an agent from a copy of vigil
// with no vigil-supervise beside it: it falls back to its own `vigil
// __supervise`, says so once at start, and its task runs and succeeds
// under it with the status the supervisor reported.
func TestLoneVigilSupervisesTasksItself(t *testing.T) {
	t.Parallel()
	lone := filepath.Join(t.TempDir(), "vigil")
	copyFile(t, vigilBin, lone)
	dags := t.TempDir()
	out := filepath.Join(t.TempDir(), "parent")
	writeDAG(t, dags, "lone", fmt.Sprintf(`
dag_id: lone
tasks:
  - id: parent
    env:
      OUT: %q
    command: [sh, -c, 'tr "\\0" " " < /proc/$PPID/cmdline > "$OUT.tmp" && mv "$OUT.tmp" "$OUT"; exit 0']
`, out))
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 0})
	a := startAgentBin(t, lone, []string{lite.URL}, agentToken, "lone", "--capacity", "1")
	agentID(t, a, 30*time.Second)
	assert.Equal(t, []any{lone, []any{supervisor.Subcommand}}, supervisorLogged(t, a))

	run, code := triggerJSON(t, lite, "lone", true)
	require.Equal(t, 0, code)
	assert.Equal(t, "success", string(run.State))
	parent := strings.TrimSpace(readFile(t, out))
	assert.True(t, strings.HasPrefix(parent, fmt.Sprintf("%s %s --parent-pid %d ", lone, supervisor.Subcommand, a.pid())),
		"the task's parent is the lone vigil's supervisor, got %q", parent)
}

// supervisorLogged returns the path and args of the agent's "task
// supervisor" log record, failing t if it logged none or more than one.
func supervisorLogged(t *testing.T, a *proc) []any {
	t.Helper()
	var got [][]any
	for _, rec := range jsonLogLines(a.logPath) {
		if rec["msg"] == "task supervisor" {
			got = append(got, []any{rec["path"], rec["args"]})
		}
	}
	require.Len(t, got, 1, "%s logs its task supervisor once", a.name)
	return got[0]
}

// copyFile copies the executable src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, b, 0o755))
}

package e2e

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTaskFailureReasons runs, through the real binary and database, a
// task whose command does not exist, one that kills itself with SIGKILL
// and one that its agent kills when its drain timeout expires: their TIs
// and runs fail with reasons start_failed, signal (naming SIGKILL) and
// agent_shutdown, where all three used to read exit_code with no code.
func TestTaskFailureReasons(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	pidDir := t.TempDir()
	writeDAG(t, dags, "missing", `
dag_id: missing
tasks:
  - id: run
    retries: 0
    command: ["vigil-e2e-no-such-command"]
`)
	writeDAG(t, dags, "suicide", `
dag_id: suicide
tasks:
  - id: run
    retries: 0
    command: ["sh", "-c", "kill -KILL $$"]
`)
	writeDAG(t, dags, "drained", fmt.Sprintf(`
dag_id: drained
tasks:
  - id: run
    retries: 0
    tags: [drain]
    env:
      PIDFILE: %q
    command:
      - sh
      - -c
      - echo $$ > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE"; sleep 300
`, filepath.Join(pidDir, "pid")))
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 1})

	for dag, want := range map[string]struct{ reason, message string }{
		"missing": {"start_failed", "try 1 could not start: "},
		"suicide": {"signal", "try 1 was killed by signal SIGKILL"},
	} {
		d, code := triggerJSON(t, lite, dag, true)
		assert.Equal(t, 3, code, "%s: runs trigger --wait exits 3 for a failed run", dag)
		ti := taskInstance(t, runDetail(t, lite, d.ID), "run")
		assert.Equal(t, "failed", ti.State, dag)
		assert.Equal(t, want.reason, ti.Reason, dag)
		assert.Contains(t, ti.Message, want.message, dag)
		assert.Nil(t, ti.ExitCode, dag)
		assert.Equal(t, want.reason, runDetail(t, lite, d.ID).Reason, "%s: the run fails with the TI's reason", dag)
	}

	agent := startAgent(t, []string{lite.URL}, agentToken, "drainer", "--tags", "drain", "--drain-timeout", "500ms", "--kill-grace", "1s")
	agentID(t, agent, 30*time.Second)
	d, code := triggerJSON(t, lite, "drained", false)
	require.Equal(t, 0, code)
	pid := readPid(t, filepath.Join(pidDir, "pid"), 30*time.Second)
	agent.signal(syscall.SIGTERM)
	agent.waitExit(t, 15*time.Second)
	assert.False(t, pidAlive(pid), "the drain deadline killed the task")
	d = waitRunState(t, lite, d.ID, "failed", 15*time.Second)
	ti := taskInstance(t, d, "run")
	assert.Equal(t, "agent_shutdown", ti.Reason)
	assert.Contains(t, ti.Message, "try 1 was killed because its agent shut down")
	assert.Equal(t, "agent_shutdown", d.Reason)
}

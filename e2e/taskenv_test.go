package e2e

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/agent"
)

// TestTaskEnvironmentHoldsNoToken runs env(1) as a task of Lite's
// in-process agent while Lite's own environment holds both tokens (as
// VIGIL_AGENT_TOKEN and VIGIL_OPERATOR_TOKEN) and an unrelated variable:
// the task's output names only allow-listed variables, its DAG env and
// the VIGIL_* task variables, and holds no token.
func TestTaskEnvironmentHoldsNoToken(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "printenv", `
dag_id: printenv
tasks:
  - id: env
    env:
      FROM_DAG: "yes"
    command: ["env"]
`)
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 1, Env: []string{
		"VIGIL_AGENT_TOKEN=" + agentToken, "VIGIL_OPERATOR_TOKEN=" + operatorToken, "UNRELATED_SECRET=hunter2",
	}})
	run, code := triggerJSON(t, lite, "printenv", true)
	require.Equal(t, 0, code, "run %d", run.ID)
	var names []string
	allow := agent.DefaultTaskEnvAllowList()
	task := map[string]bool{"FROM_DAG": true, agent.EnvRunID: true, agent.EnvDAGID: true, agent.EnvTaskID: true,
		agent.EnvTryNumber: true, agent.EnvAttemptID: true, agent.EnvTIID: true, agent.EnvRunType: true,
		agent.EnvLogicalDate: true, agent.EnvDataIntervalStart: true, agent.EnvDataIntervalEnd: true,
		agent.EnvOutput: true} // the attempt's own output file (docs/task-environment.md)
	for _, l := range taskLogs(t, lite, run.ID, "env").Lines {
		if l.Stream != "stdout" {
			continue
		}
		for _, secret := range []string{agentToken, operatorToken, "hunter2"} {
			assert.NotContains(t, l.Line, secret, "a secret reached the task")
		}
		name, _, _ := strings.Cut(l.Line, "=")
		names = append(names, name)
		allowed := task[name]
		for _, a := range allow {
			if p, ok := strings.CutSuffix(a, "*"); (ok && strings.HasPrefix(name, p)) || name == a {
				allowed = true
			}
		}
		assert.True(t, allowed, "variable %s is outside the allow-list", name)
	}
	t.Logf("task environment: %v", names)
	assert.Contains(t, names, "FROM_DAG")
	assert.Contains(t, names, "TMPDIR", "the allow-listed TMPDIR is inherited")
	assert.Contains(t, names, agent.EnvRunID)
}

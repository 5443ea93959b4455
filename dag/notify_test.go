package dag

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
)

const notifyTasks = "tasks:\n  - id: t\n    command: [\"true\"]\n"

// TestNotifyParses reads notify and sla, and keeps them through the JSON
// the store saves.
func TestNotifyParses(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte("dag_id: n\nsla: 90s\nnotify:\n  - on: [run_failed, task_failed]\n    webhook: oncall\n" +
		"  - on: [sla_missed]\n    webhook: ops.slack\n" + notifyTasks))
	require.NoError(t, err)
	assert.Equal(t, "1m30s", s.SLA.D().String())
	assert.Equal(t, []NotifyRule{{On: []state.NotifyEvent{state.NotifyRunFailed, state.NotifyTaskFailed}, Webhook: "oncall"},
		{On: []state.NotifyEvent{state.NotifySLAMissed}, Webhook: "ops.slack"}}, s.Notify)
	assert.Equal(t, []string{"oncall", "ops.slack"}, s.Webhooks())
	body, err := json.Marshal(s)
	require.NoError(t, err)
	var back Spec
	require.NoError(t, json.Unmarshal(body, &back))
	assert.Equal(t, s.Notify, back.Notify)
	assert.Equal(t, s.SLA, back.SLA)
}

// TestNotifyValidation: each rule names the DAG, the field and the value.
func TestNotifyValidation(t *testing.T) {
	t.Parallel()
	for decl, want := range map[string]string{
		"notify:\n  - on: [run_exploded]\n    webhook: w\n":           `notify[0].on[0]: unknown event "run_exploded"; the events are run_failed, run_succeeded, task_failed, task_retried, sla_missed`,
		"notify:\n  - on: []\n    webhook: w\n":                       `notify[0].on: at least one event is required`,
		"notify:\n  - on: [run_failed, run_failed]\n    webhook: w\n": `notify[0].on[1]: event "run_failed" is listed twice`,
		"notify:\n  - on: [run_failed]\n    webhook: 'a b'\n":         `notify[0].webhook: "a b" must be 1 to 250 characters`,
		"notify:\n  - on: [run_failed]\n":                             `notify[0].webhook: "" must be`,
		"sla: -1s\n":                                                  `sla: line 2: invalid duration "-1s": must not be negative`,
		"sla: 200h\n":                                                 `sla: must be positive and at most 168h (7 days), or omitted for none; got 200h`,
		"notify:\n  - on: [run_failed]\n    hook: w\n":                `notify[0]: line 4: unknown field "hook"`,
	} {
		_, err := Parse([]byte("dag_id: n\n" + decl + notifyTasks))
		require.Error(t, err, decl)
		assert.Contains(t, err.Error(), `"n"`, decl)
		assert.Contains(t, err.Error(), want, decl)
	}
}

// TestNotificationsExample: examples/notifications/nightly-report.yaml
// parses, names the webhooks its comment tells to create, and its tasks
// run with sh as an agent would.
func TestNotificationsExample(t *testing.T) {
	t.Parallel()
	s, err := ParseFile(filepath.Join("..", "examples", "notifications", "nightly-report.yaml"))
	require.NoError(t, err)
	assert.Equal(t, []string{"oncall", "team-slack"}, s.Webhooks())
	assert.Equal(t, "1h0m0s", s.SLA.D().String())
	env := append(os.Environ(), "TMPDIR="+t.TempDir(), "VIGIL_DAG_ID=nightly-report", "VIGIL_RUN_ID=1")
	for _, task := range s.Tasks {
		cmd := exec.Command(task.Command[0], task.Command[1:]...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", task.ID, out)
		if task.ID == "report" {
			assert.Equal(t, "report: total 500500\n", string(out))
		}
	}
}

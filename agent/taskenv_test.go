package agent

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// TestTaskSeesOnlyAllowedEnvironment runs a task that prints its whole
// environment (env(1), no shell adding its own) on an agent whose
// environment holds tokens and other variables: the task sees exactly the
// allowed variables, its DAG env and the VIGIL_* identity variables, and
// no token. Before the clean environment, every variable below leaked.
func TestTaskSeesOnlyAllowedEnvironment(t *testing.T) { // not parallel: t.Setenv
	const secret = "s3cret-agent-token"
	t.Setenv("VIGIL_TOKEN", secret)
	t.Setenv("VIGIL_AGENT_TOKEN", secret)
	t.Setenv("VIGIL_OPERATOR_TOKEN", secret)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("UNRELATED", "agent-only")
	t.Setenv("LC_TIME", "C")
	t.Setenv("TZ", "UTC")
	t.Setenv("LANG", "C.UTF-8")
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	envBin := "/usr/bin/env"
	task := f.enqueue(0, map[string]string{"GREETING": "hello", "PATH": "/usr/bin:/bin"}, envBin)

	c := f.waitCompletion(task.AttemptID, 10*time.Second)
	require.Equal(t, state.OutcomeSuccess, c.Outcome, "env failed: %+v", c)
	got := map[string]string{}
	for _, l := range f.lines(task.AttemptID) {
		if l.Stream != protocol.StreamStdout {
			continue
		}
		assert.NotContains(t, l.Line, secret, "a token reached the task")
		k, v, ok := strings.Cut(l.Line, "=")
		require.True(t, ok, "env line %q", l.Line)
		got[k] = v
	}
	want := map[string]string{
		"GREETING": "hello", "PATH": "/usr/bin:/bin", "LC_TIME": "C", "TZ": "UTC", "LANG": "C.UTF-8",
		EnvRunID: "7", EnvDAGID: "etl", EnvTaskID: task.TaskID, EnvTryNumber: "1",
		EnvAttemptID: task.AttemptID, EnvTIID: strconv.FormatInt(task.TIID, 10),
		EnvRunType: "manual", EnvLogicalDate: "", EnvDataIntervalStart: "", EnvDataIntervalEnd: "",
	}
	for k, v := range want {
		assert.Equal(t, v, got[k], "variable %s", k)
	}
	assert.Contains(t, got[EnvOutput], "/output-", "the attempt's own VIGIL_OUTPUT file")
	want[EnvOutput] = got[EnvOutput]
	allow := DefaultTaskEnvAllowList()
	for k := range got {
		_, fromTask := want[k]
		assert.True(t, fromTask || envAllowed(allow, k), "variable %s is neither allowed nor set by the task or Vigil", k)
	}
	for _, k := range []string{"VIGIL_TOKEN", "VIGIL_AGENT_TOKEN", "VIGIL_OPERATOR_TOKEN", "AWS_SECRET_ACCESS_KEY", "UNRELATED"} {
		assert.NotContains(t, got, k)
	}
}

// TestTaskEnvAllowConfig replaces the allow-list: only the listed names
// (and prefixes) are inherited, and the DAG env and identity variables
// still win over inherited values.
func TestTaskEnvAllowConfig(t *testing.T) {
	t.Parallel()
	allow, err := normalizeTaskEnvAllow([]string{"PATH", "MY_*"})
	require.NoError(t, err)
	base := []string{"PATH=/bin", "HOME=/root", "MY_A=1", "MY_B=2", "MYX=3", "VIGIL_TOKEN=t", "VIGIL_RUN_ID=99", "broken"}
	env := taskEnv(allow, base, nil, protocol.ClaimedTask{
		Attempt: protocol.Attempt{TIID: 5, AttemptID: "a-1"}, RunID: 3, DAGID: "d", TaskID: "x", TryNumber: 2,
		Env: map[string]string{"MY_B": "task", "VIGIL_RUN_ID": "42"},
	}, "")
	assert.Equal(t, []string{"PATH=/bin", "MY_A=1", "MY_B=task", "VIGIL_RUN_ID=3", "VIGIL_DAG_ID=d",
		"VIGIL_TASK_ID=x", "VIGIL_TRY_NUMBER=2", "VIGIL_ATTEMPT_ID=a-1", "VIGIL_TI_ID=5",
		"VIGIL_RUN_TYPE=manual", "VIGIL_LOGICAL_DATE=", "VIGIL_DATA_INTERVAL_START=", "VIGIL_DATA_INTERVAL_END="}, env)

	none, err := normalizeTaskEnvAllow([]string{})
	require.NoError(t, err)
	assert.Empty(t, none, "an empty list passes nothing")
	def, err := normalizeTaskEnvAllow(nil)
	require.NoError(t, err)
	assert.True(t, slices.Contains(def, "PATH") && slices.Contains(def, "LC_*"), "nil takes the default: %v", def)
}

// TestTaskEnvAllowRejectsCredentialsAndBadNames checks the errors name the
// entry and the rule.
func TestTaskEnvAllowRejectsCredentialsAndBadNames(t *testing.T) {
	t.Parallel()
	for entry, rule := range map[string]string{
		"VIGIL_TOKEN": "must not match VIGIL_*", "VIGIL_*": "must not match VIGIL_*", "VIG*": "must not match VIGIL_*",
		"*": "must be a variable name", "": "must be a variable name", "A-B": "must be a variable name",
		"1X": "must be a variable name", "PA*TH": "must be a variable name",
	} {
		_, err := New(Config{Servers: []string{"http://a:1"}, TaskEnvAllow: []string{"PATH", entry}})
		require.Error(t, err, "entry %q", entry)
		assert.Contains(t, err.Error(), "TaskEnvAllow[1] ", "entry %q", entry)
		assert.Contains(t, err.Error(), rule, "entry %q", entry)
	}
	_, err := New(Config{Servers: []string{"http://a:1"}, TaskEnvAllow: []string{"VIGILANT", "V", "LC_*"}})
	assert.NoError(t, err, "names outside VIGIL_* are fine")
}

// TestTaskEnvScheduleVariables checks a scheduled run's slot reaches the
// task in RFC 3339 UTC, that the task's env cannot override it, and that a
// manual run sets the slot variables empty.
func TestTaskEnvScheduleVariables(t *testing.T) {
	t.Parallel()
	loc := time.FixedZone("X", 2*3600)
	ld := time.Date(2026, 1, 2, 5, 0, 0, 0, loc)
	end := ld.Add(24 * time.Hour)
	env := taskEnv(nil, nil, nil, protocol.ClaimedTask{
		RunType: "scheduled", LogicalDate: &ld, DataIntervalStart: &ld, DataIntervalEnd: &end,
		Env: map[string]string{"VIGIL_LOGICAL_DATE": "x", "VIGIL_RUN_TYPE": "y"},
	}, "")
	assert.Subset(t, env, []string{"VIGIL_RUN_TYPE=scheduled", "VIGIL_LOGICAL_DATE=2026-01-02T03:00:00Z",
		"VIGIL_DATA_INTERVAL_START=2026-01-02T03:00:00Z", "VIGIL_DATA_INTERVAL_END=2026-01-03T03:00:00Z"})
	assert.NotContains(t, env, "VIGIL_LOGICAL_DATE=x")
	assert.NotContains(t, env, "VIGIL_RUN_TYPE=y")

	manual := taskEnv(nil, nil, nil, protocol.ClaimedTask{RunType: "manual"}, "")
	assert.Subset(t, manual, []string{"VIGIL_RUN_TYPE=manual", "VIGIL_LOGICAL_DATE=",
		"VIGIL_DATA_INTERVAL_START=", "VIGIL_DATA_INTERVAL_END="})
}

// TestTaskEnvParams checks each run parameter reaches the task as
// VIGIL_PARAM_<KEY> and a key breaking the rule is dropped.
func TestTaskEnvParams(t *testing.T) {
	t.Parallel()
	env := taskEnv(nil, nil, nil, protocol.ClaimedTask{
		Params: map[string]string{"dry_run": "true", "n": "7", "Bad": "x", "a-b": "y"},
		Env:    map[string]string{"VIGIL_PARAM_N": "overridden"},
	}, "")
	assert.Subset(t, env, []string{"VIGIL_PARAM_DRY_RUN=true", "VIGIL_PARAM_N=7"})
	assert.NotContains(t, env, "VIGIL_PARAM_N=overridden")
	for _, kv := range env {
		assert.NotContains(t, kv, "VIGIL_PARAM_BAD")
		assert.NotContains(t, kv, "VIGIL_PARAM_A-B")
	}
}

// TestTaskEnvInputsAndOutput: the claim's inputs reach the task, over a
// DAG env of the same name, and only under VIGIL_INPUT_; VIGIL_OUTPUT
// names the attempt's file and nothing overrides it.
func TestTaskEnvInputsAndOutput(t *testing.T) {
	t.Parallel()
	env := taskEnv(nil, nil, nil, protocol.ClaimedTask{
		Inputs: map[string]string{"VIGIL_INPUT_A_PATH": "/x", "VIGIL_RUN_ID": "99", "VIGIL_INPUT_BAD NAME": "y"},
		Env:    map[string]string{"VIGIL_INPUT_A_PATH": "overridden", "VIGIL_OUTPUT": "/etc/passwd"},
		RunID:  5,
	}, "/tmp/out-1")
	assert.Subset(t, env, []string{"VIGIL_INPUT_A_PATH=/x", "VIGIL_OUTPUT=/tmp/out-1", "VIGIL_RUN_ID=5"})
	for _, kv := range env {
		assert.NotContains(t, kv, "overridden")
		assert.NotContains(t, kv, "BAD NAME")
		assert.NotEqual(t, "VIGIL_OUTPUT=/etc/passwd", kv)
	}
}

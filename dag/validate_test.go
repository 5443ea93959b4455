package dag

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/trigger"

	"github.com/vigil-sched/vigil/secrets"
)

// validSpec returns a small valid DAG: a -> {b, c} -> d.
func validSpec() *Spec {
	return &Spec{
		DAGID:          "etl",
		MaxActiveTasks: 4,
		Tasks: []Task{
			{ID: "a", Command: []string{"sh", "-c", "true"}},
			{ID: "b", DependsOn: []string{"a"}, Command: []string{"true"}, Tags: []string{"gpu"}},
			{ID: "c", DependsOn: []string{"a"}, Command: []string{"true"}, Env: map[string]EnvValue{"K": Plain("v")}},
			{ID: "d", DependsOn: []string{"b", "c"}, Command: []string{"true"}},
		},
	}
}

func TestValidateAcceptsValidSpecs(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 250)
	tests := []struct {
		name   string
		mutate func(*Spec)
	}{
		{"as is", func(*Spec) {}},
		{"max_active_tasks 0 means the default", func(s *Spec) { s.MaxActiveTasks = 0 }},
		{"max_active_tasks at its limit", func(s *Spec) { s.MaxActiveTasks = MaxMaxActiveTasks }},
		{"250-character ids", func(s *Spec) {
			s.DAGID = long
			s.Tasks[0].ID = long
			s.Tasks[1].DependsOn = []string{long}
			s.Tasks[2].DependsOn = []string{long}
		}},
		{"ids with _ . -", func(s *Spec) { s.DAGID = "9a_b.c-d" }},
		{"durations at their limits", func(s *Spec) {
			s.Timeout = Duration(RunTimeoutLimit)
			s.Tasks[0].RetryDelay = Duration(RetryDelayLimit)
			s.Tasks[0].MaxRetryDelay = Duration(RetryDelayLimit)
			s.Tasks[0].ExecutionTimeout = Duration(ExecutionTimeoutLimit)
		}},
		{"retries at its limit", func(s *Spec) { s.Tasks[0].Retries = MaxRetries }},
		{"every trigger rule, and skip_exit_code at its bounds", func(s *Spec) {
			for i, r := range trigger.Rules() {
				s.Tasks = append(s.Tasks, Task{ID: fmt.Sprint("r", i), DependsOn: []string{"a"}, Command: []string{"true"},
					TriggerRule: TriggerRule(r), SkipExitCode: ExitCode(1 + i%2*254)})
			}
		}},
		{"run_as_user names of each shape", func(s *Spec) {
			s.Tasks[0].RunAsUser = "nobody"
			s.Tasks[1].RunAsUser = "_etl-2"
			s.Tasks[2].RunAsUser = strings.Repeat("a", 32)
		}},
		{"empty command arguments after the first", func(s *Spec) { s.Tasks[0].Command = []string{"echo", ""} }},
		{"exactly MaxTasks tasks", func(s *Spec) {
			s.Tasks = nil
			for i := range MaxTasks {
				s.Tasks = append(s.Tasks, Task{ID: fmt.Sprint("t", i), Command: []string{"true"}})
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := validSpec()
			tt.mutate(s)
			require.NoError(t, s.Validate())
		})
	}
}

func TestValidateRejectsEachRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*Spec)
		want   string // one full line of the error
	}{
		// dag_id (docs/design.md §9)
		{"dag_id missing", func(s *Spec) { s.DAGID = "" }, `dag (no dag_id): dag_id: required`},
		{"dag_id with a space", func(s *Spec) { s.DAGID = "nightly etl" }, `dag "nightly etl": dag_id: must be 1 to 250 characters`},
		{"dag_id starting with -", func(s *Spec) { s.DAGID = "-etl" }, `dag "-etl": dag_id: must be 1 to 250 characters`},
		{"dag_id of 251 characters", func(s *Spec) { s.DAGID = strings.Repeat("a", 251) }, `dag_id: must be 1 to 250 characters`},
		{"description with NUL", func(s *Spec) { s.Description = "a\x00b" }, `dag "etl": description: must not contain NUL bytes`},
		{"description not UTF-8", func(s *Spec) { s.Description = "\xff" }, `dag "etl": description: must be valid UTF-8`},
		// run-level limits
		{"timeout negative", func(s *Spec) { s.Timeout = Duration(-time.Second) }, `dag "etl": timeout: must not be negative; got -1s`},
		{"timeout over 30 days", func(s *Spec) { s.Timeout = Duration(RunTimeoutLimit + time.Second) }, `dag "etl": timeout: must be at most 720h (30 days); got 720h0m1s`},
		{"max_active_tasks negative", func(s *Spec) { s.MaxActiveTasks = -1 }, `dag "etl": max_active_tasks: must be between 1 and 10000, or omitted for 16 (got -1)`},
		{"max_active_tasks over the limit", func(s *Spec) { s.MaxActiveTasks = 10001 }, `dag "etl": max_active_tasks: must be between 1 and 10000`},
		// trigger rules (docs/trigger-rules.md)
		{"unknown trigger_rule", func(s *Spec) { s.Tasks[1].TriggerRule = "all_sucess" },
			`dag "etl": task "b": trigger_rule: unknown trigger rule "all_sucess": want one of all_success, all_failed,`},
		{"skip_exit_code 0 is none, 256 too high", func(s *Spec) { s.Tasks[1].SkipExitCode = 256 },
			`dag "etl": task "b": skip_exit_code: must be an exit code between 1 and 255 (got 256)`},
		{"skip_exit_code negative", func(s *Spec) { s.Tasks[1].SkipExitCode = -3 },
			`dag "etl": task "b": skip_exit_code: must be an exit code between 1 and 255 (got -3)`},
		// tasks
		{"no tasks", func(s *Spec) { s.Tasks = nil }, `dag "etl": tasks: at least one task is required`},
		{"too many tasks", func(s *Spec) {
			s.Tasks = nil
			for i := range MaxTasks + 1 {
				s.Tasks = append(s.Tasks, Task{ID: fmt.Sprint("t", i), Command: []string{"true"}})
			}
		}, `dag "etl": tasks: at most 10000 tasks are allowed (got 10001)`},
		{"task id missing", func(s *Spec) { s.Tasks[3].ID = "" }, `dag "etl": tasks[3]: id: required`},
		{"task id invalid", func(s *Spec) { s.Tasks[3].ID = "d/e" }, `dag "etl": task "d/e": id: must be 1 to 250 characters`},
		{"task id too long", func(s *Spec) { s.Tasks[3].ID = strings.Repeat("d", 251) }, `id: must be 1 to 250 characters`},
		{"duplicate task id", func(s *Spec) { s.Tasks[3].ID = "b" }, `dag "etl": task "b": id: duplicate task id (also tasks[1])`},
		// command
		{"command missing", func(s *Spec) { s.Tasks[1].Command = nil }, `dag "etl": task "b": command: required: a non-empty list`},
		{"command empty list", func(s *Spec) { s.Tasks[1].Command = []string{} }, `dag "etl": task "b": command: required: a non-empty list`},
		{"command program empty", func(s *Spec) { s.Tasks[1].Command = []string{"", "x"} }, `dag "etl": task "b": command: the first element (the program) must not be empty`},
		{"command argument with NUL", func(s *Spec) { s.Tasks[1].Command = []string{"echo", "a\x00"} }, `dag "etl": task "b": command: element 1: must not contain NUL bytes`},
		// depends_on
		{"unknown dependency", func(s *Spec) { s.Tasks[3].DependsOn = []string{"b", "extrac"} }, `dag "etl": task "d": depends_on: unknown task "extrac"`},
		{"self dependency", func(s *Spec) { s.Tasks[3].DependsOn = []string{"d"} }, `dag "etl": task "d": depends_on: a task cannot depend on itself`},
		{"repeated dependency", func(s *Spec) { s.Tasks[3].DependsOn = []string{"b", "c", "b"} }, `dag "etl": task "d": depends_on: task "b" listed more than once`},
		{"empty dependency", func(s *Spec) { s.Tasks[3].DependsOn = []string{""} }, `dag "etl": task "d": depends_on: task ids must not be empty`},
		{"cycle", func(s *Spec) { s.Tasks[0].DependsOn = []string{"d"} }, `dag "etl": task "a": depends_on: dependency cycle a -> d -> b -> a`},
		// retries and durations
		{"retries negative", func(s *Spec) { s.Tasks[2].Retries = -1 }, `dag "etl": task "c": retries: must be between 0 and 100 (got -1)`},
		{"retries over 100", func(s *Spec) { s.Tasks[2].Retries = 101 }, `dag "etl": task "c": retries: must be between 0 and 100 (got 101)`},
		{"retry_delay negative", func(s *Spec) { s.Tasks[2].RetryDelay = Duration(-time.Second) }, `dag "etl": task "c": retry_delay: must not be negative; got -1s`},
		{"retry_delay over 24h", func(s *Spec) { s.Tasks[2].RetryDelay = Duration(25 * time.Hour) }, `dag "etl": task "c": retry_delay: must be at most 24h; got 25h0m0s`},
		{"max_retry_delay negative", func(s *Spec) { s.Tasks[2].MaxRetryDelay = Duration(-time.Second) }, `dag "etl": task "c": max_retry_delay: must not be negative; got -1s`},
		{"max_retry_delay over 24h", func(s *Spec) { s.Tasks[2].MaxRetryDelay = Duration(25 * time.Hour) }, `dag "etl": task "c": max_retry_delay: must be at most 24h; got 25h0m0s`},
		{"execution_timeout negative", func(s *Spec) { s.Tasks[2].ExecutionTimeout = Duration(-time.Second) }, `dag "etl": task "c": execution_timeout: must not be negative; got -1s`},
		{"execution_timeout over 7 days", func(s *Spec) { s.Tasks[2].ExecutionTimeout = Duration(ExecutionTimeoutLimit + 1) }, `dag "etl": task "c": execution_timeout: must be at most 168h (7 days); got 168h0m0.000000001s`},
		// run_as_user
		{"run_as_user a path", func(s *Spec) { s.Tasks[2].RunAsUser = "../root" }, `dag "etl": task "c": run_as_user: "../root" must be an OS user name: 1 to 32 characters`},
		{"run_as_user a uid", func(s *Spec) { s.Tasks[2].RunAsUser = "0" }, `dag "etl": task "c": run_as_user: "0" must be an OS user name`},
		{"run_as_user an option", func(s *Spec) { s.Tasks[2].RunAsUser = "-u" }, `dag "etl": task "c": run_as_user: "-u" must be an OS user name`},
		{"run_as_user upper case", func(s *Spec) { s.Tasks[2].RunAsUser = "Etl" }, `dag "etl": task "c": run_as_user: "Etl" must be an OS user name`},
		{"run_as_user too long", func(s *Spec) { s.Tasks[2].RunAsUser = strings.Repeat("a", 33) }, `must be an OS user name`},
		// tags
		{"empty tag", func(s *Spec) { s.Tasks[1].Tags = []string{"gpu", ""} }, `dag "etl": task "b": tags: tags must not be empty strings`},
		{"repeated tag", func(s *Spec) { s.Tasks[1].Tags = []string{"gpu", "gpu"} }, `dag "etl": task "b": tags: tag "gpu" listed more than once`},
		{"tag not UTF-8", func(s *Spec) { s.Tasks[1].Tags = []string{"\xfe"} }, `dag "etl": task "b": tags: tag "\xfe": must be valid UTF-8`},
		// env
		{"env name empty", func(s *Spec) { s.Tasks[2].Env = map[string]EnvValue{"": Plain("v")} }, `dag "etl": task "c": env: variable names must not be empty`},
		{"env name with =", func(s *Spec) { s.Tasks[2].Env = map[string]EnvValue{"A=B": Plain("v")} }, `dag "etl": task "c": env: variable name "A=B" must not contain '='`},
		{"too many env variables", func(s *Spec) {
			s.Tasks[2].Env = map[string]EnvValue{}
			for i := range MaxEnvVars + 1 {
				s.Tasks[2].Env[fmt.Sprint("K", i)] = Plain("v")
			}
		}, `dag "etl": task "c": env: at most 256 variables are allowed (got 257)`},
		{"env value with NUL", func(s *Spec) { s.Tasks[2].Env = map[string]EnvValue{"A": Plain("\x00")} }, `dag "etl": task "c": env: value of "A": must not contain NUL bytes`},
		{"env secret name invalid", func(s *Spec) { s.Tasks[2].Env = map[string]EnvValue{"PW": SecretRef("db-password")} },
			`dag "etl": task "c": env: PW: secret name "db-password" must be ` + secrets.NameRule},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := validSpec()
			tt.mutate(s)
			err := s.Validate()
			require.Error(t, err)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, s.DAGID, ve.DAGID)
			assert.Contains(t, err.Error(), tt.want)
			for _, line := range strings.Split(err.Error(), "\n") {
				assert.True(t, strings.HasPrefix(line, "dag "), "every line names the DAG: %q", line)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	s := &Spec{
		DAGID:          "bad dag",
		MaxActiveTasks: -3,
		Tasks: []Task{
			{ID: "a", Command: nil, Retries: 200},
			{ID: "b", DependsOn: []string{"zz", "b"}, Command: []string{""}},
			{ID: "a", Command: []string{"true"}, Tags: []string{""}},
		},
	}
	err := s.Validate()
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	want := []Problem{
		{Index: -1, Field: "dag_id", Rule: idRule},
		{Index: -1, Field: "max_active_tasks", Rule: "must be between 1 and 10000, or omitted for 16 (got -3)"},
		{Task: "a", Index: 0, Field: "command", Rule: `required: a non-empty list such as ["sh", "-c", "..."]`},
		{Task: "a", Index: 0, Field: "retries", Rule: "must be between 0 and 100 (got 200)"},
		{Task: "b", Index: 1, Field: "depends_on", Rule: `unknown task "zz"`},
		{Task: "b", Index: 1, Field: "depends_on", Rule: "a task cannot depend on itself"},
		{Task: "b", Index: 1, Field: "command", Rule: "the first element (the program) must not be empty"},
		{Task: "a", Index: 2, Field: "id", Rule: "duplicate task id (also tasks[0])"},
		{Task: "a", Index: 2, Field: "tags", Rule: "tags must not be empty strings"},
	}
	assert.Equal(t, want, ve.Problems)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, len(want))
	assert.Equal(t, `dag "bad dag": task "b": depends_on: unknown task "zz"`, lines[4])
}

func TestValidateCycles(t *testing.T) {
	t.Parallel()
	task := func(id string, deps ...string) Task {
		return Task{ID: id, DependsOn: deps, Command: []string{"true"}}
	}
	tests := []struct {
		name  string
		tasks []Task
		want  []string // the Rule of every cycle problem, in order
	}{
		{"two tasks", []Task{task("a", "b"), task("b", "a")}, []string{"dependency cycle a -> b -> a"}},
		{"three tasks, path starts at the first declared",
			[]Task{task("x"), task("c", "a"), task("a", "b"), task("b", "c")},
			[]string{"dependency cycle c -> a -> b -> c"}},
		{"cycle behind an acyclic prefix",
			[]Task{task("root"), task("p", "root", "q"), task("q", "r"), task("r", "p")},
			[]string{"dependency cycle p -> q -> r -> p"}},
		{"two separate cycles",
			[]Task{task("a", "b"), task("b", "a"), task("c", "d"), task("d", "c")},
			[]string{"dependency cycle a -> b -> a", "dependency cycle c -> d -> c"}},
		{"two cycles through one task",
			[]Task{task("a", "b", "c"), task("b", "a"), task("c", "a")},
			[]string{"dependency cycle a -> b -> a", "dependency cycle a -> c -> a"}},
		{"a self-dependency is not reported as a cycle", []Task{task("a", "a")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &Spec{DAGID: "cyc", Tasks: tt.tasks}
			err := s.Validate()
			require.Error(t, err)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			var got []string
			for _, p := range ve.Problems {
				if strings.HasPrefix(p.Rule, "dependency cycle") {
					got = append(got, p.Rule)
					assert.Equal(t, "depends_on", p.Field)
					assert.True(t, strings.HasPrefix(p.Rule, "dependency cycle "+p.Task+" -> "), "the problem is filed under the cycle's first task")
				}
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestValidateCapsReportedCycles(t *testing.T) {
	t.Parallel()
	s := &Spec{DAGID: "many"}
	for i := range 2 * maxCyclesShown {
		a, b := fmt.Sprint("a", i), fmt.Sprint("b", i)
		s.Tasks = append(s.Tasks,
			Task{ID: a, DependsOn: []string{b}, Command: []string{"true"}},
			Task{ID: b, DependsOn: []string{a}, Command: []string{"true"}})
	}
	var ve *ValidationError
	require.ErrorAs(t, s.Validate(), &ve)
	require.Len(t, ve.Problems, maxCyclesShown+1)
	assert.Equal(t, `dag "many": depends_on: more dependency cycles not shown; fix the ones above and validate again`,
		dagRef("many")+": "+ve.Problems[maxCyclesShown].String())
}

func TestValidateLongChainDoesNotRecurse(t *testing.T) {
	t.Parallel()
	// A 10000-task chain closed into a ring: the DFS must cope without
	// deep recursion and report the one cycle.
	s := &Spec{DAGID: "ring"}
	for i := range MaxTasks {
		s.Tasks = append(s.Tasks, Task{ID: fmt.Sprint("t", i), DependsOn: []string{fmt.Sprint("t", (i+1)%MaxTasks)}, Command: []string{"true"}})
	}
	var ve *ValidationError
	require.ErrorAs(t, s.Validate(), &ve)
	require.Len(t, ve.Problems, 1)
	assert.True(t, strings.HasPrefix(ve.Problems[0].Rule, "dependency cycle t0 -> t1 -> t2 -> "))
	assert.Equal(t, "dependency cycle t0 -> t1 -> t2 -> t3 -> t4 -> t5 -> t6 -> t7 -> t8 -> t9 -> t10 -> t11 -> "+
		"... (9984 more) -> t9996 -> t9997 -> t9998 -> t9999 -> t0", ve.Problems[0].Rule, "a long cycle is elided")
}

func TestValidateNil(t *testing.T) {
	t.Parallel()
	var s *Spec
	err := s.Validate()
	require.Error(t, err)
	var ve *ValidationError
	assert.False(t, errors.As(err, &ve))
}

func TestValidateQuotesLongValues(t *testing.T) {
	t.Parallel()
	s := validSpec()
	s.Tasks[3].DependsOn = []string{strings.Repeat("z", 10000)}
	err := s.Validate()
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 200, "a huge value must not flood the message")
	assert.Contains(t, err.Error(), `depends_on: unknown task "zzzz`)
	assert.Contains(t, err.Error(), `"...`)
}

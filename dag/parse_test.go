package dag

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const goodYAML = `# The example of docs/design.md §9, with every field set.
dag_id: nightly-etl
description: Nightly extract and load.
timeout: 1h                 # run timeout
max_active_tasks: 8
tasks:
  - id: extract
    command: ["sh", "-c", "echo extract"]
    env:
      SOURCE: s3://bucket/in
    tags: [script, big]
    retries: 2
    retry_delay: 10s
    retry_exponential_backoff: true
    max_retry_delay: 5m
    execution_timeout: 5m
  - id: load
    depends_on: [extract]
    command: ["sh", "-c", "echo load"]
`

func goodSpec() *Spec {
	return &Spec{
		DAGID:          "nightly-etl",
		Description:    "Nightly extract and load.",
		Timeout:        Duration(time.Hour),
		MaxActiveTasks: 8,
		Tasks: []Task{
			{
				ID:                      "extract",
				Command:                 []string{"sh", "-c", "echo extract"},
				Env:                     map[string]EnvValue{"SOURCE": Plain("s3://bucket/in")},
				Tags:                    []string{"script", "big"},
				Retries:                 2,
				RetryDelay:              Duration(10 * time.Second),
				RetryExponentialBackoff: true,
				MaxRetryDelay:           Duration(5 * time.Minute),
				ExecutionTimeout:        Duration(5 * time.Minute),
			},
			{ID: "load", DependsOn: []string{"extract"}, Command: []string{"sh", "-c", "echo load"}},
		},
	}
}

func TestParseGoodSpecRoundTrips(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(goodYAML))
	require.NoError(t, err)
	require.Equal(t, goodSpec(), s)

	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		j, err := json.Marshal(s)
		require.NoError(t, err)
		// Durations are strings; numeric fields are always written.
		assert.Contains(t, string(j), `"timeout":"1h0m0s"`)
		assert.Contains(t, string(j), `"retry_delay":"10s"`)
		assert.Contains(t, string(j), `"retries":0`)
		var back Spec
		require.NoError(t, json.Unmarshal(j, &back))
		assert.Equal(t, s, &back)
		require.NoError(t, back.Validate())
	})
	t.Run("YAML", func(t *testing.T) {
		t.Parallel()
		y, err := yaml.Marshal(s)
		require.NoError(t, err)
		assert.Contains(t, string(y), "retry_delay: 10s")
		back, err := Parse(y)
		require.NoError(t, err)
		assert.Equal(t, s, back)
	})
}

func TestParseAppliesDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		extra string // YAML lines appended to a one-task spec
		check func(t *testing.T, s *Spec)
	}{
		{"max_active_tasks omitted", "", func(t *testing.T, s *Spec) {
			assert.Equal(t, DefaultMaxActiveTasks, s.MaxActiveTasks)
		}},
		{"max_active_tasks 0 is omitted", "max_active_tasks: 0\n", func(t *testing.T, s *Spec) {
			assert.Equal(t, DefaultMaxActiveTasks, s.MaxActiveTasks)
		}},
		{"max_active_tasks kept", "max_active_tasks: 3\n", func(t *testing.T, s *Spec) {
			assert.Equal(t, 3, s.MaxActiveTasks)
		}},
		{"no timeouts or retries by default", "", func(t *testing.T, s *Spec) {
			assert.Zero(t, s.Timeout)
			assert.Equal(t, Task{ID: "a", Command: []string{"true"}}, s.Tasks[0])
		}},
		{"exponential backoff caps at 1h by default", "    retry_exponential_backoff: true\n", func(t *testing.T, s *Spec) {
			assert.Equal(t, Duration(time.Hour), s.Tasks[0].MaxRetryDelay)
		}},
		{"exponential backoff keeps an explicit cap", "    retry_exponential_backoff: true\n    max_retry_delay: 90s\n", func(t *testing.T, s *Spec) {
			assert.Equal(t, Duration(90*time.Second), s.Tasks[0].MaxRetryDelay)
		}},
		{"empty lists and maps become nil", "    depends_on: []\n    tags: []\n    env: {}\n", func(t *testing.T, s *Spec) {
			assert.Nil(t, s.Tasks[0].DependsOn)
			assert.Nil(t, s.Tasks[0].Tags)
			assert.Nil(t, s.Tasks[0].Env)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := "dag_id: d\ntasks:\n  - id: a\n    command: [\"true\"]\n" + tt.extra
			if strings.HasPrefix(tt.extra, "max_active_tasks") {
				in = "dag_id: d\n" + tt.extra + "tasks:\n  - id: a\n    command: [\"true\"]\n"
			}
			s, err := Parse([]byte(in))
			require.NoError(t, err)
			tt.check(t, s)
		})
	}
}

func TestParseRejectsUnknownFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"top level", "dag_id: d\nschedul: '@daily'\ntasks: [{id: a, command: [x]}]\n",
			[]string{`dag "d": line 2: unknown field "schedul" (DAG fields: dag_id, description, timeout, max_active_tasks, schedule, timezone, start_date, end_date, catchup, max_active_runs, paused, params, sla, notify, tasks)`}},
		{"in a task", "dag_id: d\ntasks:\n  - id: a\n    command: [x]\n    retires: 3\n",
			[]string{`dag "d": task "a": line 5: unknown field "retires" (task fields: id, depends_on, command, env, tags, retries,`}},
		{"in a flow task without id", "dag_id: d\ntasks: [{command: [x], dependson: [b]}]\n",
			[]string{`dag "d": tasks[0]: line 2: unknown field "dependson"`}},
		{"several at once", "dag_id: d\nowner: me\ntasks:\n  - id: a\n    cmd: [x]\n  - id: b\n    command: [x]\n    pooll: p\n",
			[]string{
				`dag "d": line 2: unknown field "owner"`,
				`dag "d": task "a": line 5: unknown field "cmd"`,
				`dag "d": task "b": line 8: unknown field "pooll"`,
			}},
		{"repeated field", "dag_id: d\ntasks:\n  - id: a\n    command: [x]\n    retries: 1\n    retries: 2\n",
			[]string{`task "a": line 6: field "retries" repeated (first at line 5)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.in))
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Len(t, strings.Split(err.Error(), "\n"), len(tt.want), "one line per problem")
		})
	}
}

// TestParseEnvSecretReference: {secret: NAME} decodes to a reference, a
// plain value (a number too) stays a string, and both survive the JSON
// round trip the API and the store make, keeping the reference a
// reference.
func TestParseEnvSecretReference(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte("dag_id: d\ntasks:\n  - id: a\n    command: [x]\n    env:\n      DB_PASSWORD: {secret: db_password}\n      PORT: 5432\n      HOST: db\n"))
	require.NoError(t, err)
	want := map[string]EnvValue{"DB_PASSWORD": SecretRef("db_password"), "PORT": Plain("5432"), "HOST": Plain("db")}
	assert.Equal(t, want, s.Tasks[0].Env)
	assert.Equal(t, []SecretUse{{TaskID: "a", Var: "DB_PASSWORD", Secret: "db_password"}}, s.SecretUses())
	assert.Equal(t, []string{"db_password"}, s.SecretNames())

	b, err := json.Marshal(s.Tasks[0].Env)
	require.NoError(t, err)
	assert.JSONEq(t, `{"DB_PASSWORD": {"secret": "db_password"}, "PORT": "5432", "HOST": "db"}`, string(b))
	var back map[string]EnvValue
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, want, back)
	for _, bad := range []string{`{"A": {"secret": ""}}`, `{"A": {"secret": "x", "y": 1}}`, `{"A": 5}`, `{"A": {"value": "x"}}`} {
		assert.Error(t, json.Unmarshal([]byte(bad), &back), bad)
	}
}

func TestParseDecodeErrorsNameTheField(t *testing.T) {
	t.Parallel()
	task := "dag_id: d\ntasks:\n  - id: a\n    command: [x]\n"
	tests := []struct {
		name string
		in   string
		want string
	}{
		// Negative durations are rejected at decode, with the field name
		// (docs/design.md §9).
		{"negative timeout", "dag_id: d\ntimeout: -1h\ntasks: [{id: a, command: [x]}]\n",
			`dag "d": timeout: line 2: invalid duration "-1h": must not be negative`},
		{"negative retry_delay", task + "    retry_delay: -5s\n",
			`dag "d": task "a": retry_delay: line 5: invalid duration "-5s": must not be negative`},
		{"negative max_retry_delay", task + "    max_retry_delay: -1m\n",
			`dag "d": task "a": max_retry_delay: line 5: invalid duration "-1m": must not be negative`},
		{"negative execution_timeout", task + "    execution_timeout: -1s\n",
			`dag "d": task "a": execution_timeout: line 5: invalid duration "-1s": must not be negative`},
		{"negative duration in a flow mapping", "dag_id: d\ntasks: [{id: a, command: [x], retry_delay: -2s}]\n",
			`dag "d": task "a": retry_delay: line 2: invalid duration "-2s": must not be negative`},
		{"duration without unit", task + "    retry_delay: 10\n",
			`dag "d": task "a": retry_delay: line 5: invalid duration "10": not Go duration syntax such as "90s" or "5m"`},
		{"retries not a number", task + "    retries: many\n",
			"dag \"d\": task \"a\": retries: line 5: cannot unmarshal !!str `many` into int"},
		{"command not a list", "dag_id: d\ntasks:\n  - id: a\n    command: echo hi\n",
			"dag \"d\": task \"a\": command: line 4: command must be a list of strings (the argv, run without a shell), not a string `echo hi`: " +
				`write command: ["echo", "hi"], or command: ["sh", "-c", "echo hi"] for a shell`},
		{"command a quoted string", "dag_id: d\ntasks:\n  - id: a\n    command: \"echo hi\"\n",
			"dag \"d\": task \"a\": command: line 4: command must be a list of strings (the argv, run without a shell), not a string `echo hi`: " +
				`write command: ["echo", "hi"], or command: ["sh", "-c", "echo hi"] for a shell`},
		{"tags a string", task + "    tags: gpu\n",
			"dag \"d\": task \"a\": tags: line 5: must be a list of strings, e.g. [a, b], not a string `gpu`"},
		{"env not a mapping", task + "    env: [A]\n",
			`dag "d": task "a": env: line 5: must be a mapping of names to string values or {secret: NAME}, e.g. {REGION: "eu", DB_PASSWORD: {secret: db_password}}, not a list`},
		{"env secret name empty", task + "    env: {A: {secret: \"\"}}\n",
			`dag "d": task "a": env: line 5: cannot unmarshal !!map into an env value: want a string, or {secret: NAME} naming a secret`},
		{"env value a list", task + "    env: {A: [x]}\n",
			`dag "d": task "a": env: A: line 5: cannot unmarshal !!seq into an env value: want a string, or {secret: NAME} naming a secret`},
		{"env value a mapping without secret", task + "    env:\n      A: {secrte: pw}\n",
			`dag "d": task "a": env: line 6: cannot unmarshal !!map into an env value: want a string, or {secret: NAME} naming a secret`},
		// trigger_rule and skip_exit_code are checked at decode, with the
		// line (docs/trigger-rules.md).
		{"unknown trigger_rule", task + "    trigger_rule: all_sucess\n",
			`dag "d": task "a": trigger_rule: line 5: unknown trigger rule "all_sucess": want one of all_success, all_failed, all_done,`},
		{"trigger_rule a list", task + "    trigger_rule: [all_done]\n",
			`dag "d": task "a": trigger_rule: line 5: cannot unmarshal !!seq into dag.TriggerRule: want a rule name such as all_done`},
		{"skip_exit_code 256", task + "    skip_exit_code: 256\n",
			`dag "d": task "a": skip_exit_code: line 5: must be an exit code between 1 and 255 (got 256)`},
		{"skip_exit_code negative", task + "    skip_exit_code: -1\n",
			`dag "d": task "a": skip_exit_code: line 5: must be an exit code between 1 and 255 (got -1)`},
		{"skip_exit_code a string", task + "    skip_exit_code: \"99\"\n",
			"dag \"d\": task \"a\": skip_exit_code: line 5: cannot unmarshal !!str `99` into dag.ExitCode: want an integer between 1 and 255"},
		{"tasks not a list", "dag_id: d\ntasks: {a: 1}\n",
			`dag "d": tasks: line 2: cannot unmarshal !!map into []dag.Task`},
		{"spec not a mapping", "- a\n- b\n",
			`line 1: cannot unmarshal !!seq into dag.Spec`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseSyntaxErrorsHaveLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"bad indentation", "dag_id: d\n  tasks: []\n", "yaml: line 2: mapping values are not allowed in this context"},
		{"unclosed flow sequence", "dag_id: d\ntasks: [\n", "yaml: line 2: did not find expected node content"},
		{"tab indentation", "dag_id: d\ntasks:\n\t- id: a\n", "yaml: line 3: found character that cannot start any token"},
		{"unknown alias", "dag_id: *nope\n", `yaml: unknown anchor 'nope' referenced`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseDocuments(t *testing.T) {
	t.Parallel()
	one := "dag_id: d\ntasks: [{id: a, command: [x]}]\n"
	tests := []struct {
		name string
		in   string
		want string // "" means accepted
	}{
		{"empty", "", "empty DAG spec"},
		{"only a comment", "# nothing\n", "empty DAG spec"},
		{"explicit markers", "---\n" + one + "...\n", ""},
		{"trailing empty document", one + "---\n", ""},
		{"two specs", one + "---\n" + strings.ReplaceAll(one, "dag_id: d", "dag_id: e"), "yaml: line 3: a second YAML document; a DAG spec holds exactly one"},
		{"garbage after the spec", one + "---\n[\n", "yaml: line 4: did not find expected node content"},
		{"null document", "~\n", `dag (no dag_id): dag_id: required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse([]byte(tt.in))
			if tt.want == "" {
				require.NoError(t, err)
				assert.Equal(t, "d", s.DAGID)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseValidatesAfterDecoding(t *testing.T) {
	t.Parallel()
	in := "dag_id: nightly-etl\ntasks:\n  - id: extract\n    command: [x]\n  - id: load\n    depends_on: [extrac]\n    command: [x]\n"
	_, err := Parse([]byte(in))
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	assert.EqualError(t, err, `dag "nightly-etl": task "load": depends_on: unknown task "extrac"`)
}

// specWithTasks returns a valid YAML spec with n independent tasks.
func specWithTasks(n int) []byte {
	var b strings.Builder
	b.WriteString("dag_id: big\ntasks:\n")
	for i := range n {
		fmt.Fprintf(&b, "- {id: t%d, command: [x]}\n", i)
	}
	return []byte(b.String())
}

func TestParseLimits(t *testing.T) {
	t.Parallel()
	atLimit := specWithTasks(1)
	atLimit = append(atLimit, '#')
	atLimit = append(atLimit, strings.Repeat("x", MaxSpecBytes-len(atLimit)-1)...)
	atLimit = append(atLimit, '\n')
	require.Len(t, atLimit, MaxSpecBytes)

	aliasBomb := "dag_id: d\n" +
		"a: &a [x, x, x, x, x, x, x, x, x, x]\n" +
		"b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
		"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
		"e: &e [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n" +
		"f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n" +
		"g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n" +
		"tasks: [{id: a, command: *g}]\n"

	var wideEnv strings.Builder
	wideEnv.WriteString("dag_id: d\ntasks:\n  - id: a\n    command: [x]\n    env:\n")
	for i := range MaxEnvVars + 1 {
		fmt.Fprintf(&wideEnv, "      K%d: v\n", i)
	}

	tests := []struct {
		name string
		in   []byte
		want string // "" means accepted
	}{
		{"exactly 1 MiB", atLimit, ""},
		{"over 1 MiB", append(atLimit, '\n'), "DAG spec is 1048577 bytes, over the 1 MiB limit (1048576 bytes)"},
		{"MaxTasks tasks", specWithTasks(MaxTasks), ""},
		{"MaxTasks+1 tasks", specWithTasks(MaxTasks + 1), `dag "big": tasks: at most 10000 tasks are allowed (got 10001)`},
		{"alias bomb", []byte(aliasBomb), "yaml: the document expands to more than 1048576 nodes"},
		{"alias to itself", []byte("dag_id: d\ntasks: &t [{id: a, command: *t}]\n"), `yaml: line 2: anchor "t" contains an alias to itself`},
		{"too many mapping keys", []byte(wideEnv.String()), "yaml: line 6: a mapping with 257 keys; the limit is 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.in)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestParseFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", goodYAML)
	bad := writeFile(t, dir, "bad.yaml", "dag_id: d\ntasks:\n  - id: a\n    command: []\n    retries: 101\n")
	huge := writeFile(t, dir, "huge.yaml", strings.Repeat("#", MaxSpecBytes+1))

	s, err := ParseFile(good)
	require.NoError(t, err)
	assert.Equal(t, goodSpec(), s)

	_, err = ParseFile(bad)
	require.Error(t, err)
	assert.Equal(t,
		bad+`: dag "d": task "a": command: required: a non-empty list such as ["sh", "-c", "..."]`+"\n"+
			bad+`: dag "d": task "a": retries: must be between 0 and 100 (got 101)`,
		err.Error(), "every line carries the path")
	var ve *ValidationError
	assert.ErrorAs(t, err, &ve, "the path prefix still unwraps")

	_, err = ParseFile(huge)
	require.Error(t, err)
	assert.Equal(t, huge+": DAG spec is 1048577 bytes, over the 1 MiB limit (1048576 bytes)", err.Error())

	_, err = ParseFile(filepath.Join(dir, "missing.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), "missing.yaml")
}

func TestLoadPaths(t *testing.T) {
	t.Parallel()
	spec := func(id string) string { return "dag_id: " + id + "\ntasks: [{id: a, command: [x]}]\n" }
	ids := func(specs []*Spec) []string {
		out := make([]string, 0, len(specs))
		for _, s := range specs {
			out = append(out, s.DAGID)
		}
		return out
	}

	dir := t.TempDir()
	writeFile(t, dir, "b.yaml", spec("bee"))
	writeFile(t, dir, "a.yml", spec("ay"))
	writeFile(t, dir, "c.yaml", spec("sea"))
	writeFile(t, dir, "notes.txt", "not a spec")
	writeFile(t, dir, "README.md", "# not a spec")
	writeFile(t, dir, "sub/d.yaml", spec("nested"))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "dir.yaml"), 0o755))
	other := t.TempDir()
	extra := writeFile(t, other, "extra.conf", spec("extra"))
	dup := writeFile(t, other, "dup.yaml", spec("bee"))
	broken := writeFile(t, other, "broken.yaml", "dag_id: x\ntasks: [{id: a, command: [x], retries: -1}]\n")
	empty := t.TempDir()

	tests := []struct {
		name    string
		paths   []string
		want    []string
		wantErr string
	}{
		{"a directory, sorted, non-recursive, yaml only", []string{dir}, []string{"ay", "bee", "sea"}, ""},
		{"a file of any name, in argument order", []string{extra, dir}, []string{"extra", "ay", "bee", "sea"}, ""},
		{"a file reached twice is read once", []string{dir, filepath.Join(dir, "b.yaml")}, []string{"ay", "bee", "sea"}, ""},
		{"no paths", nil, []string{}, ""},
		{"an empty directory", []string{empty}, []string{}, ""},
		{"duplicate dag_id names both files", []string{dir, dup}, nil,
			dup + `: dag "bee": dag_id already declared in ` + filepath.Join(dir, "b.yaml")},
		{"a bad file stops the load", []string{dir, broken}, nil,
			broken + `: dag "x": task "a": retries: must be between 0 and 100 (got -1)`},
		{"a missing path", []string{filepath.Join(dir, "nope")}, nil, "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			specs, err := LoadPaths(tt.paths...)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Nil(t, specs)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, ids(specs))
		})
	}
}

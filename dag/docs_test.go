package dag

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestDAGSpecDocListsEveryField fails when a field of Spec, Task or Param
// has no row in docs/dag-spec.md's tables (its type, default, rule and an
// example): a new field must be documented where users look it up.
func TestDAGSpecDocListsEveryField(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "dag-spec.md"))
	require.NoError(t, err)
	md := string(raw)
	for _, typ := range []reflect.Type{reflect.TypeFor[Spec](), reflect.TypeFor[Task](), reflect.TypeFor[Param]()} {
		fields := strings.Split(yamlFields(typ), ", ") // the unknown-field hint's list
		require.NotEmpty(t, fields, typ.Name())
		for _, f := range fields {
			row := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(f) + "` \\|([^|\\n]*\\|){4}\\s*$")
			assert.Regexp(t, row, md, "docs/dag-spec.md has no row (type, default, rule, example) for %s field %q", typ.Name(), f)
		}
	}
}

// yamlBlocks returns the fenced ```yaml (or yml) blocks of a Markdown
// text, with the line each starts on.
func yamlBlocks(md string) (blocks []string, lines []int) {
	var cur []string
	in, start := false, 0
	for i, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && (trimmed == "```yaml" || trimmed == "```yml"):
			in, start, cur = true, i+1, nil
		case in && strings.HasPrefix(trimmed, "```"):
			in = false
			blocks, lines = append(blocks, strings.Join(cur, "\n")+"\n"), append(lines, start)
		case in:
			cur = append(cur, line)
		}
	}
	return blocks, lines
}

// TestDocsYAMLSnippetsParse parses every YAML block of docs/*.md and
// README.md: each is valid YAML, and each that is a DAG spec (it has
// dag_id and tasks) passes Parse, so a reader who copies one can apply
// it.
func TestDocsYAMLSnippetsParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	require.NoError(t, err)
	files = append(files, filepath.Join("..", "README.md"))
	specs := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		blocks, lines := yamlBlocks(string(raw))
		for i, b := range blocks {
			where := filepath.Base(f) + ":" + strconv.Itoa(lines[i])
			var doc any
			if !assert.NoError(t, yaml.Unmarshal([]byte(b), &doc), "%s: not valid YAML", where) {
				continue
			}
			m, ok := doc.(map[string]any)
			if _, spec := m["dag_id"]; !ok || !spec {
				continue
			}
			specs++
			_, err := Parse([]byte(b))
			assert.NoError(t, err, "%s: the DAG spec does not parse", where)
		}
	}
	assert.GreaterOrEqual(t, specs, 3, "the walk found the docs' DAG specs")
}

// TestDAGSpecDocMistakes checks what docs/dag-spec.md says of common
// mistakes: a command or tags written as one string and env as a list are
// refused naming the rule, and an unquoted number in env is stored as its
// string.
func TestDAGSpecDocMistakes(t *testing.T) {
	base := "dag_id: d\ntasks:\n  - id: a\n"
	for yamlText, want := range map[string]string{
		base + "    command: \"echo hi\"\n":               "command must be a list of strings (the argv, run without a shell), not a string",
		base + "    command: [x]\n    env: [REGION=eu]\n": "env: line 5: must be a mapping of names to string values",
		base + "    command: [x]\n    tags: gpu\n":        "tags: line 5: must be a list of strings",
	} {
		_, err := Parse([]byte(yamlText))
		require.Error(t, err, yamlText)
		assert.Contains(t, err.Error(), want)
	}
	s, err := Parse([]byte(base + "    command: [x]\n    env: {LIMIT: 500}\n"))
	require.NoError(t, err)
	assert.Equal(t, Plain("500"), s.Tasks[0].Env["LIMIT"])
}

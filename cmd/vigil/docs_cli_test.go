package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
)

// knownDAGs maps each DAG id a reader can have to its task ids: the DAGs
// of examples/ (what `vigil lite --dags examples` and `make run` apply),
// plus those that specs in extra define.
func knownDAGs(t *testing.T, extra ...*dag.Spec) map[string]map[string]bool {
	t.Helper()
	specs, err := dag.LoadPaths(filepath.Join("..", "..", "examples"), filepath.Join("..", "..", "examples", "pools"))
	require.NoError(t, err)
	out := map[string]map[string]bool{}
	for _, s := range append(specs, extra...) {
		tasks := map[string]bool{}
		for _, task := range s.Tasks {
			tasks[task.ID] = true
		}
		out[s.DAGID] = tasks
	}
	return out
}

// placeholder is an argument that stands for a value in a synopsis
// (RUN_ID, DAG, $RUN) rather than naming one.
var placeholder = regexp.MustCompile(`^[A-Z][A-Z_]*$|^\$|^<`)

// checkNames fails when a vigil command line names a DAG or task that
// dags does not hold: the DAG of runs trigger and dags
// pause/unpause/next/backfill, the task of logs and tasks mark (in any
// DAG).
func checkNames(t *testing.T, where string, args []string, dags map[string]map[string]bool) {
	t.Helper()
	cmd, rest, err := newRootCmd().Find(args[1:])
	if !assert.NoError(t, err, "%s: %q names no vigil command", where, strings.Join(args, " ")) {
		return
	}
	require.NoError(t, cmd.ParseFlags(rest), "%s: %q", where, strings.Join(args, " "))
	pos := cmd.Flags().Args()
	arg := func(i int) string {
		if i < len(pos) && !placeholder.MatchString(pos[i]) {
			return pos[i]
		}
		return ""
	}
	switch cmd.CommandPath() {
	case "vigil runs trigger", "vigil dags pause", "vigil dags unpause", "vigil dags next", "vigil dags backfill",
		"vigil dags delete":
		if d := arg(0); d != "" {
			assert.Contains(t, dags, d, "%s: %q names DAG %s, which examples/ does not define", where, strings.Join(args, " "), d)
		}
	case "vigil logs", "vigil tasks mark":
		if task := arg(1); task != "" {
			found := false
			for _, tasks := range dags {
				found = found || tasks[task]
			}
			assert.True(t, found, "%s: %q names task %s, which no DAG of examples/ has", where, strings.Join(args, " "), task)
		}
	}
}

// docCommands returns the vigil command lines inside the fenced code
// blocks of a Markdown text (bin/vigil and a "$ " prompt included), each
// split into words, with their line numbers; synopsis lines (with [ or |)
// are left out, as are comments after #.
func docCommands(md string) (cmds [][]string, lines []int) {
	in := false
	text := strings.Split(strings.ReplaceAll(md, "\\\n", " "), "\n")
	for i, line := range text {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			in = !in
			continue
		}
		if !in {
			continue
		}
		trimmed = strings.TrimPrefix(trimmed, "$ ")
		trimmed = strings.TrimPrefix(trimmed, "bin/")
		if !strings.HasPrefix(trimmed, "vigil ") {
			continue
		}
		if c, _, ok := strings.Cut(trimmed, " #"); ok {
			trimmed = c
		}
		if strings.ContainsAny(trimmed, "[|") {
			continue
		}
		cmds = append(cmds, shellWords(trimmed))
		lines = append(lines, i+1)
	}
	return cmds, lines
}

// TestDocsCLIExamplesNameRealDAGs reads every vigil command in the code
// blocks of docs/*.md and README.md: each is a real command with flags it
// has, and every DAG and task it names exists in examples/, so a reader
// who copies it gets a run, not "not found".
func TestDocsCLIExamplesNameRealDAGs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	require.NoError(t, err)
	files = append(files, filepath.Join("..", "..", "README.md"))
	seen := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		md := string(raw)
		dags := knownDAGs(t)
		cmds, lines := docCommands(md)
		for i, args := range cmds {
			seen++
			checkNames(t, filepath.Base(f)+":"+strconv.Itoa(lines[i]), args, dags)
		}
	}
	assert.Greater(t, seen, 20, "the walk found the docs' commands")
}

// TestRootExampleNamesExampleDAGs: `vigil --help` starts Lite with
// examples/, so the DAG its example triggers must be one of them.
func TestRootExampleNamesExampleDAGs(t *testing.T) {
	dags := knownDAGs(t)
	lines := exampleCommands(examples["vigil"])
	require.NotEmpty(t, lines)
	for _, args := range lines {
		checkNames(t, "vigil --help", args, dags)
	}
}

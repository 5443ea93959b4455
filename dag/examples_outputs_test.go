package dag

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/outputs"
)

// TestOutputsExampleHandsItsCountsOn: the outputs example
// (docs/task-environment.md, "Outputs") writes what the outputs parser
// reads, and its downstream tasks, given the VIGIL_INPUT_* variables the
// control plane would build from it, check and print them.
func TestOutputsExampleHandsItsCountsOn(t *testing.T) {
	t.Parallel()
	requireTools(t)
	r := newExampleRun(t, loadExamples(t)["outputs"], "1")
	file := filepath.Join(t.TempDir(), "output")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	code, out := r.run(t, "count-words", 1, "VIGIL_OUTPUT="+file)
	require.Equal(t, 0, code, out)
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	got, err := outputs.Parse(data)
	require.NoError(t, err, "%s", data)
	assert.Equal(t, map[string]string{"words": "500", "distinct": "37", "summary": "words: 500\ndistinct: 37"}, got)

	env, err := outputs.InputEnv(map[string]map[string]string{"count-words": got})
	require.NoError(t, err)
	var vars []string
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	checkOut := filepath.Join(t.TempDir(), "check-output")
	require.NoError(t, os.WriteFile(checkOut, nil, 0o600))
	code, out = r.run(t, "check", 1, append(vars, "VIGIL_OUTPUT="+checkOut)...)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "check: ok: 500 words, 37 distinct")
	data, err = os.ReadFile(checkOut)
	require.NoError(t, err)
	assert.Equal(t, "ratio=13\n", string(data))
	code, out = r.run(t, "report", 1, vars...)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "  words: 500\n  distinct: 37\n")

	code, out = r.run(t, "check", 1, "VIGIL_OUTPUT="+checkOut)
	assert.NotEqual(t, 0, code, "without its inputs check fails: %s", out)
}

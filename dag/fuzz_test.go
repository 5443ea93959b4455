package dag

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse feeds Parse arbitrary input. Parse must never panic, and any
// spec it accepts must be a fixed point: valid, and equal to itself after
// a JSON round trip (the form the API and the store use).
//
// A YAML round trip is deliberately not checked: yaml.Marshal writes some
// strings (e.g. "\n0" in a list) as block scalars that the same library
// cannot read back (testdata/fuzz/FuzzParse/ffcff35a9e46449a). Specs are
// stored and served as JSON, so that library bug does not reach Vigil.
//
//	go test -run='^$' -fuzz=FuzzParse -fuzztime=60s ./dag
func FuzzParse(f *testing.F) {
	examples, err := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	require.NoError(f, err)
	for _, p := range examples {
		data, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(data)
	}
	for _, seed := range []string{
		goodYAML,
		"",
		"~",
		"dag_id: d\ntasks: [{id: a, command: [x]}]\n",
		"dag_id: d\ntasks:\n  - id: a\n    command: [x]\n    depends_on: [a]\n",
		"dag_id: d\ntasks: [{id: a, command: [x], depends_on: [b]}, {id: b, command: [x], depends_on: [a]}]\n",
		"dag_id: d\ntasks: [{id: a, command: [x], retry_delay: -1s}]\n",
		"dag_id: d\ntasks: [{id: a, command: [x], retry_exponential_backoff: true, env: {}}]\n",
		"dag_id: d\ntasks: [{id: a, command: [x], env: {A: \"\\0\"}}]\n",
		"dag_id: d\ntasks: [{id: a, command: [x], bogus: 1}]\n",
		"dag_id: d\ntasks: [{id: a, command: [x], env: {A: {secret: db_password}, B: b}}]\n",
		"dag_id: d\ntasks: [{id: a, command: [x], env: {A: {secret: \"\"}}}]\n",
		"dag_id: d\ntasks: [{id: a, command: [x], env: {A: {secret: [x]}}}]\n",
		"dag_id: d\n  tasks: [\n",
		"dag_id: d\ntasks: &t [{id: a, command: *t}]\n",
		"dag_id: d\nx: &x {id: a, command: [x]}\ntasks: [*x]\n",
		"dag_id: d\ntasks: [{<<: {id: a, command: [x]}, retries: 1}]\n",
		"dag_id: d\n---\ndag_id: e\n",
		"- 1\n",
		"dag_id: !!binary ZA==\ntasks: [{id: a, command: [x]}]\n",
		"dag_id: d\ntasks: [{id: a, command: [x], max_retry_delay: 2562047h47m16.854775807s}]\n",
	} {
		f.Add([]byte(seed))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			require.Nil(t, s)
			require.NotEmpty(t, err.Error())
			return
		}
		require.NoError(t, s.Validate())
		// TopoOrder lists every task once on any accepted spec.
		require.Len(t, s.TopoOrder(), len(s.Tasks))

		j, err := json.Marshal(s)
		require.NoError(t, err)
		var back Spec
		require.NoError(t, json.Unmarshal(j, &back), "%s", j)
		require.Equal(t, s, &back, "JSON round trip: %s", j)
		require.NoError(t, back.Validate())
	})
}

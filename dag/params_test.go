package dag

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const paramsDAG = "dag_id: p\nparams:\n  region: {type: string, default: eu}\n  n: {type: int, default: 3}\n" +
	"  ratio: {type: float}\n  dry: {type: bool, default: false}\ntasks:\n  - id: t\n    command: [\"true\"]\n"

// TestParamsValidation checks each declaration rule names the DAG, the
// field and the rule.
func TestParamsValidation(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(paramsDAG))
	require.NoError(t, err)
	for decl, want := range map[string]string{
		"Bad: {type: string}":         `params.Bad: param name "Bad" must match ^[a-z][a-z0-9_]*$`,
		"1x: {type: string}":          `params.1x: param name "1x" must match`,
		"x: {type: list}":             `params.x.type: must be string, int, float or bool (got "list")`,
		"x: {type: int, default: a}":  `params.x.default: must be a int (got a, string)`,
		"x: {type: bool, default: 2}": `params.x.default: must be a bool`,
	} {
		_, err := Parse([]byte("dag_id: p\nparams:\n  " + decl + "\ntasks:\n  - id: t\n    command: [\"true\"]\n"))
		require.Error(t, err, decl)
		assert.Contains(t, err.Error(), `"p"`, decl)
		assert.Contains(t, err.Error(), want, decl)
	}
}

// TestCheckConf checks defaults, conversion and each rejection rule.
func TestCheckConf(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(paramsDAG))
	require.NoError(t, err)
	got, err := s.CheckConf(map[string]any{"n": "7", "ratio": 0.5})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"region": "eu", "n": int64(7), "ratio": 0.5, "dry": false}, got)
	got, err = s.CheckConf(map[string]any{"n": float64(2), "ratio": "1.5", "dry": "true"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"region": "eu", "n": int64(2), "ratio": 1.5, "dry": true}, got)

	for name, tc := range map[string]struct {
		conf     map[string]any
		key, msg string
	}{
		"unknown":   {map[string]any{"regoin": "x"}, "regoin", "unknown param: the DAG declares dry, n, ratio, region"},
		"bad key":   {map[string]any{"Region": "x"}, "Region", "must match ^[a-z][a-z0-9_]*$"},
		"ill int":   {map[string]any{"n": "many"}, "n", "must be a int"},
		"frac int":  {map[string]any{"n": 1.5}, "n", "must be a int"},
		"ill bool":  {map[string]any{"dry": "perhaps"}, "dry", "must be a bool"},
		"ill float": {map[string]any{"ratio": true}, "ratio", "must be a float"},
		"ill str":   {map[string]any{"region": 3.0}, "region", "must be a string"},
	} {
		_, err := s.CheckConf(tc.conf)
		var ce *ConfError
		require.True(t, errors.As(err, &ce), name)
		assert.Equal(t, tc.key, ce.Key, name)
		assert.Contains(t, err.Error(), tc.msg, name)
		assert.Contains(t, err.Error(), `conf key "`+tc.key+`"`, name)
	}

	free, err := Parse([]byte("dag_id: f\ntasks:\n  - id: t\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	got, err = free.CheckConf(map[string]any{"any_key": "v", "n": 1.0})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"any_key": "v", "n": 1.0}, got)
	_, err = free.CheckConf(map[string]any{"x": []any{1}})
	assert.ErrorContains(t, err, "must be a string, number or bool")
	_, err = free.CheckConf(map[string]any{"X-Y": "v"})
	assert.ErrorContains(t, err, "must match")
	assert.Equal(t, "VIGIL_PARAM_RUN_DATE", ParamEnvName("run_date"))
}

package dag

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

func TestDurationRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    Duration
		text string
	}{
		{0, "0s"},
		{Duration(90 * time.Second), "1m30s"},
		{Duration(time.Hour + time.Millisecond), "1h0m0.001s"},
		{Duration(1), "1ns"},
		{Duration(math.MaxInt64), "2562047h47m16.854775807s"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			j, err := json.Marshal(tt.d)
			require.NoError(t, err)
			assert.JSONEq(t, `"`+tt.text+`"`, string(j))
			var fromJSON Duration
			require.NoError(t, json.Unmarshal(j, &fromJSON))
			assert.Equal(t, tt.d, fromJSON)

			y, err := yaml.Marshal(tt.d)
			require.NoError(t, err)
			assert.Equal(t, tt.text+"\n", string(y))
			var fromYAML Duration
			require.NoError(t, yaml.Unmarshal(y, &fromYAML))
			assert.Equal(t, tt.d, fromYAML)
			assert.Equal(t, time.Duration(tt.d), tt.d.D())
		})
	}
}

func TestDurationDecodeErrors(t *testing.T) {
	t.Parallel()
	type holder struct {
		RetryDelay Duration `yaml:"retry_delay" json:"retry_delay"`
	}
	tests := []struct {
		name     string
		yaml     string
		json     string
		wantYAML string
		wantJSON string
	}{
		{"negative", `retry_delay: -5s`, `{"retry_delay": "-5s"}`,
			`line 1: invalid duration "-5s": must not be negative`,
			`json: cannot unmarshal string "-5s" (must not be negative) into Go struct field holder.retry_delay of type dag.Duration`},
		{"no unit", `retry_delay: 10`, `{"retry_delay": 10}`,
			`line 1: invalid duration "10": not Go duration syntax`,
			`json: cannot unmarshal non-string 10 into Go struct field holder.retry_delay of type dag.Duration`},
		{"garbage", `retry_delay: soon`, `{"retry_delay": "soon"}`,
			`line 1: invalid duration "soon": not Go duration syntax such as "90s" or "5m"`,
			`json: cannot unmarshal string "soon" (not Go duration syntax such as "90s" or "5m") into Go struct field holder.retry_delay`},
		{"days are not Go syntax", `retry_delay: 1d`, `{"retry_delay": "1d"}`,
			`invalid duration "1d"`, `string "1d"`},
		{"a list", `retry_delay: [1s]`, `{"retry_delay": ["1s"]}`,
			`line 1: cannot unmarshal !!seq into dag.Duration`, `non-string ["1s"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var h holder
			err := yaml.Unmarshal([]byte(tt.yaml), &h)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantYAML)

			err = json.Unmarshal([]byte(tt.json), &h)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantJSON)
		})
	}
}

func TestDurationNullLeavesValue(t *testing.T) {
	t.Parallel()
	d := Duration(time.Second)
	require.NoError(t, json.Unmarshal([]byte(`null`), &d))
	assert.Equal(t, Duration(time.Second), d)
}

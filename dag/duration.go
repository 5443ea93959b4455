package dag

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a non-negative [time.Duration] that reads and writes as a Go
// duration string ("90s", "5m", "1h30m") in YAML and JSON, the syntax
// docs/design.md §9 fixes for every duration. Zero means "not set"; each field says
// what that implies.
//
// Decoding rejects negative values, because no duration in a spec has a
// meaning below zero, and rejects bare numbers, because "10" is ambiguous
// between seconds and nanoseconds. Encoding always writes the
// [time.Duration.String] form, which decodes back to the same value.
type Duration time.Duration

// D returns d as a [time.Duration].
func (d Duration) D() time.Duration { return time.Duration(d) }

// String returns d in Go duration syntax, e.g. "1m30s".
func (d Duration) String() string { return time.Duration(d).String() }

// parseDuration parses a non-negative Go duration string. The error is the
// reason only; callers add the value, the field and the position.
func parseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New(`not Go duration syntax such as "90s" or "5m"`)
	}
	if v < 0 {
		return 0, errors.New("must not be negative")
	}
	return Duration(v), nil
}

// MarshalJSON encodes d as a JSON string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON decodes a JSON string in Go duration syntax. null leaves d
// unchanged, as encoding/json does for other types. Errors are
// *json.UnmarshalTypeError so that encoding/json adds the field path (e.g.
// "tasks.retry_delay") to the message.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: "non-string " + truncate(string(b)), Type: reflect.TypeFor[Duration]()}
	}
	v, err := parseDuration(s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: fmt.Sprintf("string %s (%v)", quote(s), err), Type: reflect.TypeFor[Duration]()}
	}
	*d = v
	return nil
}

// MarshalYAML encodes d as a YAML string such as "1m30s".
func (d Duration) MarshalYAML() (any, error) {
	return d.String(), nil
}

// UnmarshalYAML decodes a YAML scalar in Go duration syntax. Errors are
// *yaml.TypeError carrying the line, so decoding carries on and reports
// every bad field at once; [Parse] adds the field name.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{
			fmt.Sprintf("line %d: cannot unmarshal %s into dag.Duration: want a Go duration string such as \"90s\"", n.Line, n.ShortTag()),
		}}
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: invalid duration %s: %v", n.Line, quote(n.Value), err)}}
	}
	*d = v
	return nil
}

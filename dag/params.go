package dag

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Param types a DAG's params may declare.
const (
	ParamString = "string"
	ParamInt    = "int"
	ParamFloat  = "float"
	ParamBool   = "bool"
)

// MaxParams caps the params a DAG may declare and the keys a run's conf
// may carry.
const MaxParams = 64

// ParamKeyRule is the rule a param name and a conf key must match; a task
// receives the value as VIGIL_PARAM_<KEY>, the key upper-cased.
const ParamKeyRule = `must match ^[a-z][a-z0-9_]*$ (lower-case letters, digits and '_', starting with a letter) and be at most 64 characters`

var paramKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// ValidParamKey reports whether k is a valid param name or conf key.
func ValidParamKey(k string) bool { return len(k) <= 64 && paramKeyRE.MatchString(k) }

// Param declares one run parameter of a DAG (docs/schedules.md, "Run
// parameters").
type Param struct {
	// Type is string, int, float or bool.
	Type string `yaml:"type" json:"type"`
	// Default fills the key when a trigger leaves it out; nil: none.
	Default any `yaml:"default,omitempty" json:"default,omitempty"`
}

// UnmarshalJSON reads a Param and gives its default the Go type its
// declared type has after Parse (an int as int64, a float as float64):
// JSON numbers decode as float64, and a spec must read back from JSON, the
// form the API and the store keep, as it was parsed. A default that does
// not fit its type is left as decoded, for validation to name.
func (p *Param) UnmarshalJSON(b []byte) error {
	type plain Param
	var q plain
	if err := json.Unmarshal(b, &q); err != nil {
		return err
	}
	*p = Param(q)
	if p.Default != nil {
		if c, err := coerceParam(p.Type, p.Default); err == nil {
			p.Default = c
		}
	}
	return nil
}

// params checks the params declaration.
func (v *validator) params(s *Spec) {
	if len(s.Params) > MaxParams {
		v.dagf("params", "at most %d params are allowed (got %d)", MaxParams, len(s.Params))
	}
	names := make([]string, 0, len(s.Params))
	for k := range s.Params {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		p := s.Params[k]
		field := "params." + k
		if !ValidParamKey(k) {
			v.dagf(field, "param name %q %s", k, ParamKeyRule)
			continue
		}
		switch p.Type {
		case ParamString, ParamInt, ParamFloat, ParamBool:
		default:
			v.dagf(field+".type", "must be string, int, float or bool (got %q)", p.Type)
			continue
		}
		if p.Default != nil {
			c, err := coerceParam(p.Type, p.Default)
			if err != nil {
				v.dagf(field+".default", "%v", err)
				continue
			}
			p.Default = c // one Go type per param type, whatever the source wrote
			s.Params[k] = p
		}
	}
}

// coerceParam converts v to the param type t. A string is parsed for int,
// float and bool (so `--conf n=3` is an int); a whole float is an int.
func coerceParam(t string, v any) (any, error) {
	switch t {
	case ParamString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case ParamBool:
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			if b, err := strconv.ParseBool(x); err == nil {
				return b, nil
			}
		}
	case ParamInt:
		switch x := v.(type) {
		case int:
			return int64(x), nil
		case int64:
			return x, nil
		case uint64:
			if x <= math.MaxInt64 {
				return int64(x), nil
			}
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
				return int64(x), nil
			}
		case string:
			if n, err := strconv.ParseInt(x, 10, 64); err == nil {
				return n, nil
			}
		}
	case ParamFloat:
		switch x := v.(type) {
		case int:
			return float64(x), nil
		case int64:
			return float64(x), nil
		case uint64:
			return float64(x), nil
		case float64:
			if !math.IsInf(x, 0) && !math.IsNaN(x) {
				return x, nil
			}
		case string:
			if f, err := strconv.ParseFloat(x, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
				return f, nil
			}
		}
	}
	return nil, fmt.Errorf("must be a %s (got %v, %T)", t, v, v)
}

// ConfError is a run conf that breaks a rule; Key names the offending key.
type ConfError struct {
	DAGID, Key, Rule string
}

func (e *ConfError) Error() string {
	return fmt.Sprintf("%s: conf key %q: %s", dagRef(e.DAGID), e.Key, e.Rule)
}

// CheckConf validates a trigger's conf against the DAG's params and
// returns it with defaults filled and values converted to their declared
// types. A DAG that declares params accepts only those keys; one that
// declares none accepts any valid key with a string, number or bool
// value. The first broken rule, in key order, is a *ConfError.
func (s *Spec) CheckConf(conf map[string]any) (map[string]any, error) {
	if len(conf) > MaxParams {
		return nil, &ConfError{DAGID: s.DAGID, Key: "", Rule: fmt.Sprintf("at most %d keys are allowed (got %d)", MaxParams, len(conf))}
	}
	keys := make([]string, 0, len(conf))
	for k := range conf {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make(map[string]any, len(conf)+len(s.Params))
	for _, k := range keys {
		if !ValidParamKey(k) {
			return nil, &ConfError{DAGID: s.DAGID, Key: k, Rule: ParamKeyRule}
		}
		v := conf[k]
		if len(s.Params) == 0 {
			switch x := v.(type) {
			case string:
				if r := textRule(x); r != "" {
					return nil, &ConfError{DAGID: s.DAGID, Key: k, Rule: r}
				}
			case bool, int, int64, uint64, float64:
			default:
				return nil, &ConfError{DAGID: s.DAGID, Key: k, Rule: fmt.Sprintf("must be a string, number or bool (got %T)", v)}
			}
			out[k] = v
			continue
		}
		p, ok := s.Params[k]
		if !ok {
			return nil, &ConfError{DAGID: s.DAGID, Key: k, Rule: "unknown param: the DAG declares " + strings.Join(s.paramNames(), ", ")}
		}
		c, err := coerceParam(p.Type, v)
		if err != nil {
			return nil, &ConfError{DAGID: s.DAGID, Key: k, Rule: err.Error()}
		}
		if x, ok := c.(string); ok {
			if r := textRule(x); r != "" {
				return nil, &ConfError{DAGID: s.DAGID, Key: k, Rule: r}
			}
		}
		out[k] = c
	}
	for k, p := range s.Params {
		if _, ok := out[k]; !ok && p.Default != nil {
			c, err := coerceParam(p.Type, p.Default)
			if err != nil {
				return nil, &ConfError{DAGID: s.DAGID, Key: k, Rule: "default " + err.Error()}
			}
			out[k] = c
		}
	}
	return out, nil
}

func (s *Spec) paramNames() []string {
	n := make([]string, 0, len(s.Params))
	for k := range s.Params {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// ParamEnvName is the task variable that carries the conf key k.
func ParamEnvName(k string) string { return "VIGIL_PARAM_" + strings.ToUpper(k) }

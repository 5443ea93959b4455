package dag

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"go.yaml.in/yaml/v3"
)

// EnvValue is the value of one variable of a task's env: a plain string,
// or a reference to a named secret, written {secret: NAME} in YAML and
// {"secret": "NAME"} in JSON. A spec, and everything read back from it
// (GET /v1/dags/{id}, the run's TIs), holds only the reference; the value
// reaches only the agent that claims the task (docs/security.md "Secrets").
type EnvValue struct {
	// Value is the plain value; empty when Secret is set.
	Value string
	// Secret names the secret whose value the variable takes
	// (secrets.ValidName); empty for a plain value.
	Secret string
}

// Plain returns an EnvValue of the plain string v.
func Plain(v string) EnvValue { return EnvValue{Value: v} }

// SecretRef returns an EnvValue naming the secret name.
func SecretRef(name string) EnvValue { return EnvValue{Secret: name} }

// envSecret is the object form of a secret reference.
type envSecret struct {
	Secret string `json:"secret" yaml:"secret"`
}

// MarshalJSON writes a plain value as a JSON string and a reference as
// {"secret": NAME}.
func (v EnvValue) MarshalJSON() ([]byte, error) {
	if v.Secret != "" {
		return json.Marshal(envSecret{v.Secret})
	}
	return json.Marshal(v.Value)
}

// UnmarshalJSON reads what MarshalJSON writes. Errors are
// *json.UnmarshalTypeError, so encoding/json adds the field path.
func (v *EnvValue) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		var ref map[string]json.RawMessage
		if err := json.Unmarshal(b, &ref); err != nil {
			return err
		}
		raw, ok := ref["secret"]
		var name string
		if !ok || len(ref) != 1 || json.Unmarshal(raw, &name) != nil || name == "" {
			return &json.UnmarshalTypeError{Value: "object " + truncate(string(b)) + ` (want {"secret": NAME})`, Type: reflect.TypeFor[EnvValue]()}
		}
		*v = EnvValue{Secret: name}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: truncate(string(b)) + " (want a string or {\"secret\": NAME})", Type: reflect.TypeFor[EnvValue]()}
	}
	*v = EnvValue{Value: s}
	return nil
}

// MarshalYAML writes a plain value as a string and a reference as
// {secret: NAME}.
func (v EnvValue) MarshalYAML() (any, error) {
	if v.Secret != "" {
		return envSecret{v.Secret}, nil
	}
	return v.Value, nil
}

// UnmarshalYAML reads a scalar as a plain value (as a string field
// would) and a mapping with the one key secret as a reference. Errors are
// *yaml.TypeError carrying the line, so [Parse] reports every bad field.
func (v *EnvValue) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*v = EnvValue{Value: s}
		return nil
	case yaml.MappingNode:
		if len(n.Content) == 2 && n.Content[0].Value == "secret" && n.Content[1].Kind == yaml.ScalarNode && n.Content[1].Tag == "!!str" && n.Content[1].Value != "" {
			*v = EnvValue{Secret: n.Content[1].Value}
			return nil
		}
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf(
		"line %d: cannot unmarshal %s into an env value: want a string, or {secret: NAME} naming a secret", n.Line, n.ShortTag())}}
}

// SecretRefs returns the secrets t's env names, by variable name; nil when
// it names none.
func (t *Task) SecretRefs() map[string]string {
	var out map[string]string
	for k, v := range t.Env {
		if v.Secret != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v.Secret
		}
	}
	return out
}

// SecretNames returns the distinct secret names the spec's tasks refer
// to, sorted; nil when none.
func (s *Spec) SecretNames() []string {
	var out []string
	for _, u := range s.SecretUses() {
		out = append(out, u.Secret)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SecretUse is one reference to a secret in a spec: where it is, for an
// error that points at it.
type SecretUse struct {
	TaskID, Var, Secret string
}

// String names the reference: task "load": env DB_PASSWORD: secret "db_password".
func (u SecretUse) String() string {
	return fmt.Sprintf("task %s: env %s: secret %s", quote(u.TaskID), u.Var, quote(u.Secret))
}

// SecretUses lists every reference to a secret in the spec, in task order
// and by variable name within a task.
func (s *Spec) SecretUses() []SecretUse {
	var out []SecretUse
	for i := range s.Tasks {
		t := &s.Tasks[i]
		refs := t.SecretRefs()
		for _, k := range slices.Sorted(maps.Keys(refs)) {
			out = append(out, SecretUse{TaskID: t.ID, Var: k, Secret: refs[k]})
		}
	}
	return out
}

package dag

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vigil-sched/vigil/trigger"
)

// TriggerRule is a task's trigger_rule (docs/trigger-rules.md): one of
// trigger.Rules, or empty for trigger.Default. Decoding YAML refuses any
// other name with its line, as Duration does; Validate refuses one in a
// spec built or decoded any other way.
type TriggerRule string

// Rule is the rule r names, trigger.Default when r is empty.
func (r TriggerRule) Rule() trigger.Rule {
	if r == "" {
		return trigger.Default
	}
	return trigger.Rule(r)
}

// triggerRuleProblem is the rule an invalid trigger_rule breaks, or "".
func triggerRuleProblem(r TriggerRule) string {
	if r == "" || trigger.Rule(r).Valid() {
		return ""
	}
	names := make([]string, 0, len(trigger.Rules()))
	for _, x := range trigger.Rules() {
		names = append(names, string(x))
	}
	return fmt.Sprintf("unknown trigger rule %s: want one of %s", quote(string(r)), strings.Join(names, ", "))
}

// UnmarshalYAML decodes a rule name. Errors are *yaml.TypeError carrying
// the line, so decoding carries on and reports every bad field at once;
// [Parse] adds the task and the field.
func (r *TriggerRule) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return &yaml.TypeError{Errors: []string{
			fmt.Sprintf("line %d: cannot unmarshal %s into dag.TriggerRule: want a rule name such as all_done", n.Line, n.ShortTag()),
		}}
	}
	if p := triggerRuleProblem(TriggerRule(n.Value)); p != "" {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, p)}}
	}
	*r = TriggerRule(n.Value)
	return nil
}

// The range of Task.SkipExitCode: an exit status a process can report
// (0 is success, and cannot mean skipped).
const (
	MinSkipExitCode = 1
	MaxSkipExitCode = 255
)

// ExitCode is a task's skip_exit_code: MinSkipExitCode to
// MaxSkipExitCode, or 0 for none. Decoding YAML refuses a value out of
// range with its line; Validate refuses one in a spec built otherwise.
type ExitCode int

// exitCodeProblem is the rule an invalid skip_exit_code breaks, or "".
func exitCodeProblem(c ExitCode) string {
	if c == 0 || c >= MinSkipExitCode && c <= MaxSkipExitCode {
		return ""
	}
	return fmt.Sprintf("must be an exit code between %d and %d (got %d)", MinSkipExitCode, MaxSkipExitCode, c)
}

// UnmarshalYAML decodes an integer exit code; errors as TriggerRule's.
func (c *ExitCode) UnmarshalYAML(n *yaml.Node) error {
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		return &yaml.TypeError{Errors: []string{
			fmt.Sprintf("line %d: cannot unmarshal %s `%s` into dag.ExitCode: want an integer between %d and %d",
				n.Line, n.ShortTag(), truncate(n.Value), MinSkipExitCode, MaxSkipExitCode),
		}}
	}
	if p := exitCodeProblem(ExitCode(v)); p != "" {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, p)}}
	}
	*c = ExitCode(v)
	return nil
}

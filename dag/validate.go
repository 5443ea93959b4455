package dag

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vigil-sched/vigil/secrets"
)

// ValidationError lists every rule a spec breaks (docs/design.md §9), so that a
// user can fix a file in one pass. Validate returns it, and so does Parse
// for a spec that decodes but is invalid.
type ValidationError struct {
	// DAGID is the spec's dag_id as written, possibly empty or invalid.
	DAGID string
	// Problems are in a fixed order: DAG-level fields, then tasks in
	// declaration order, then dependency cycles. Never empty.
	Problems []Problem
}

// Error lists every problem, one per line, each as
// `dag "ID": task "ID": FIELD: RULE` (no task part for DAG-level fields).
func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(dagRef(e.DAGID))
		b.WriteString(": ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Problem is one broken rule.
type Problem struct {
	// Task is the id of the task at fault; "" for a DAG-level problem or a
	// task without an id.
	Task string
	// Index is the task's position in Spec.Tasks, or -1 for a DAG-level
	// problem.
	Index int
	// Field is the YAML/JSON field name, e.g. "depends_on".
	Field string
	// Rule says what is wrong, e.g. `unknown task "extrac"`.
	Rule string
}

// String formats p without the DAG: `task "ID": FIELD: RULE`, or
// `tasks[N]: FIELD: RULE` for a task without an id.
func (p Problem) String() string {
	if p.Index < 0 {
		return p.Field + ": " + p.Rule
	}
	return taskRef(p.Task, p.Index) + ": " + p.Field + ": " + p.Rule
}

func dagRef(id string) string {
	if id == "" {
		return "dag (no dag_id)"
	}
	return "dag " + quote(id)
}

func taskRef(id string, index int) string {
	if id == "" {
		return "tasks[" + strconv.Itoa(index) + "]"
	}
	return "task " + quote(id)
}

// maxCyclesShown caps the cycles Validate spells out; a DAG can have
// exponentially many, and the first few are enough to start fixing.
const maxCyclesShown = 10

// Validate checks s against the rules of docs/design.md §9 and returns nil or a
// *ValidationError holding every violation:
//
//   - dag_id and task ids: required, ValidID, task ids unique;
//   - at least one and at most MaxTasks tasks;
//   - command: non-empty, first element non-empty;
//   - depends_on: existing tasks only, not itself, no repeats, no cycles
//     (each reported with its path, "a -> b -> a");
//   - retries: 0..MaxRetries; max_active_tasks: 0 (the default) or
//     1..MaxMaxActiveTasks;
//   - durations: not negative; retry_delay and max_retry_delay at most
//     RetryDelayLimit, execution_timeout at most ExecutionTimeoutLimit,
//     timeout at most RunTimeoutLimit;
//   - schedule: a cron expression, descriptor or "@every D" (D ≥ 1s,
//     whole seconds), with start_date (RFC 3339) required, end_date not
//     before it, timezone an IANA zone; timezone, start_date, end_date,
//     catchup and paused only with a schedule; max_active_runs 0 (the
//     default) or 1..MaxMaxActiveRuns;
//   - sla: at most SLALimit; notify: at most MaxNotifyRules entries, each
//     naming a webhook by WebhookNameRule (whether it exists is the
//     server's check at apply) and one or more known events, each once;
//   - tags: non-empty, no repeats;
//   - trigger_rule: empty or one of trigger.Rules; skip_exit_code: 0 (none)
//     or MinSkipExitCode..MaxSkipExitCode;
//   - env: at most MaxEnvVars variables; names non-empty, without "=";
//     a {secret: NAME} value names a secret by secrets.NameRule (whether
//     the secret exists is the server's check at apply);
//   - pool: empty or ValidPoolName (whether the pool exists is the
//     server's check at apply); priority_weight within ±MaxPriorityWeight;
//   - every string: valid UTF-8 without NUL bytes, since specs are stored
//     in PostgreSQL, whose text and jsonb types reject both, and NUL cannot
//     be passed in argv or the environment.
//
// Validate does not modify s and works on specs that ApplyDefaults has not
// seen.
func (s *Spec) Validate() error {
	if s == nil {
		return errors.New("dag: nil spec")
	}
	v := &validator{}
	v.spec(s)
	if len(v.problems) == 0 {
		return nil
	}
	return &ValidationError{DAGID: s.DAGID, Problems: v.problems}
}

type validator struct {
	problems []Problem
}

func (v *validator) dagf(field, format string, args ...any) {
	v.problems = append(v.problems, Problem{Index: -1, Field: field, Rule: fmt.Sprintf(format, args...)})
}

func (v *validator) spec(s *Spec) {
	switch {
	case s.DAGID == "":
		v.dagf("dag_id", "required")
	case !ValidID(s.DAGID):
		v.dagf("dag_id", "%s", idRule)
	}
	if r := textRule(s.Description); r != "" {
		v.dagf("description", "%s", r)
	}
	if r := durationRule(s.Timeout, RunTimeoutLimit); r != "" {
		v.dagf("timeout", "%s", r)
	}
	if s.MaxActiveTasks < 0 || s.MaxActiveTasks > MaxMaxActiveTasks {
		v.dagf("max_active_tasks", "must be between 1 and %d, or omitted for %d (got %d)",
			MaxMaxActiveTasks, DefaultMaxActiveTasks, s.MaxActiveTasks)
	}
	v.schedule(s)
	v.params(s)
	v.notify(s)
	switch {
	case len(s.Tasks) == 0:
		v.dagf("tasks", "at least one task is required")
	case len(s.Tasks) > MaxTasks:
		v.dagf("tasks", "at most %d tasks are allowed (got %d)", MaxTasks, len(s.Tasks))
	}

	first := make(map[string]int, len(s.Tasks)) // id -> first declaring index
	for i, t := range s.Tasks {
		if _, dup := first[t.ID]; !dup {
			first[t.ID] = i
		}
	}
	for i := range s.Tasks {
		v.task(s.Tasks, i, first)
	}
	v.cycles(s.Tasks, first)
}

// schedule checks the schedule fields (docs/schedules.md).
func (v *validator) schedule(s *Spec) {
	if s.MaxActiveRuns < 0 || s.MaxActiveRuns > MaxMaxActiveRuns {
		v.dagf("max_active_runs", "must be between 1 and %d, or omitted for %d on a scheduled DAG (got %d)",
			MaxMaxActiveRuns, DefaultMaxActiveRuns, s.MaxActiveRuns)
	}
	if s.Schedule == "" {
		for _, f := range []struct {
			name string
			set  bool
		}{{"timezone", s.Timezone != ""}, {"start_date", s.StartDate != ""}, {"end_date", s.EndDate != ""},
			{"catchup", s.Catchup}, {"paused", s.Paused}} {
			if f.set {
				v.dagf(f.name, "only allowed with a schedule")
			}
		}
		return
	}
	if r := textRule(s.Schedule); r != "" {
		v.dagf("schedule", "%s", r)
	} else if _, _, err := parseSchedule(s.Schedule); err != nil {
		v.dagf("schedule", "%v", err)
	}
	if _, err := scheduleLocation(s.Timezone); err != nil {
		v.dagf("timezone", "%v", err)
	}
	var start time.Time
	switch {
	case s.StartDate == "":
		v.dagf("start_date", "required with a schedule (an RFC 3339 time such as 2026-01-02T00:00:00Z)")
	default:
		var err error
		if start, err = parseDate(s.StartDate); err != nil {
			v.dagf("start_date", "%v", err)
		}
	}
	if s.EndDate != "" {
		end, err := parseDate(s.EndDate)
		switch {
		case err != nil:
			v.dagf("end_date", "%v", err)
		case !start.IsZero() && end.Before(start):
			v.dagf("end_date", "must not be before start_date %s", s.StartDate)
		}
	}
}

const idRule = "must be 1 to 250 characters of A-Z, a-z, 0-9, '_', '.', '-', starting with a letter or digit"

func (v *validator) task(tasks []Task, i int, first map[string]int) {
	t := &tasks[i]
	add := func(field, format string, args ...any) {
		v.problems = append(v.problems, Problem{Task: t.ID, Index: i, Field: field, Rule: fmt.Sprintf(format, args...)})
	}

	switch {
	case t.ID == "":
		add("id", "required")
	case !ValidID(t.ID):
		add("id", "%s", idRule)
	case first[t.ID] != i:
		add("id", "duplicate task id (also tasks[%d])", first[t.ID])
	}

	listed := make(map[string]bool, len(t.DependsOn))
	for _, dep := range t.DependsOn {
		_, known := first[dep]
		switch {
		case dep == "":
			add("depends_on", "task ids must not be empty")
		case listed[dep]:
			add("depends_on", "task %s listed more than once", quote(dep))
		case dep == t.ID:
			add("depends_on", "a task cannot depend on itself")
		case !known:
			add("depends_on", "unknown task %s", quote(dep))
		}
		listed[dep] = true
	}

	switch {
	case len(t.Command) == 0:
		add("command", "required: a non-empty list such as [\"sh\", \"-c\", \"...\"]")
	case t.Command[0] == "":
		add("command", "the first element (the program) must not be empty")
	}
	for j, arg := range t.Command {
		if r := textRule(arg); r != "" {
			add("command", "element %d: %s", j, r)
		}
	}

	if len(t.Env) > MaxEnvVars {
		add("env", "at most %d variables are allowed (got %d)", MaxEnvVars, len(t.Env))
	}
	for _, name := range slices.Sorted(maps.Keys(t.Env)) {
		switch {
		case name == "":
			add("env", "variable names must not be empty")
		case strings.Contains(name, "="):
			add("env", "variable name %s must not contain '='", quote(name))
		case textRule(name) != "":
			add("env", "variable name %s: %s", quote(name), textRule(name))
		}
		v := t.Env[name]
		if v.Secret != "" {
			if !secrets.ValidName(v.Secret) {
				add("env", "%s: secret name %s must be %s", name, quote(v.Secret), secrets.NameRule)
			}
			continue
		}
		if r := textRule(v.Value); r != "" {
			add("env", "value of %s: %s", quote(name), r)
		}
	}

	seenTag := make(map[string]bool, len(t.Tags))
	for _, tag := range t.Tags {
		switch {
		case tag == "":
			add("tags", "tags must not be empty strings")
		case seenTag[tag]:
			add("tags", "tag %s listed more than once", quote(tag))
		case textRule(tag) != "":
			add("tags", "tag %s: %s", quote(tag), textRule(tag))
		}
		seenTag[tag] = true
	}

	if t.Retries < 0 || t.Retries > MaxRetries {
		add("retries", "must be between 0 and %d (got %d)", MaxRetries, t.Retries)
	}
	if r := durationRule(t.RetryDelay, RetryDelayLimit); r != "" {
		add("retry_delay", "%s", r)
	}
	if r := durationRule(t.MaxRetryDelay, RetryDelayLimit); r != "" {
		add("max_retry_delay", "%s", r)
	}
	if r := durationRule(t.ExecutionTimeout, ExecutionTimeoutLimit); r != "" {
		add("execution_timeout", "%s", r)
	}
	if r := triggerRuleProblem(t.TriggerRule); r != "" {
		add("trigger_rule", "%s", r)
	}
	if r := exitCodeProblem(t.SkipExitCode); r != "" {
		add("skip_exit_code", "%s", r)
	}
	if t.RunAsUser != "" && !ValidUserName(t.RunAsUser) {
		add("run_as_user", "%s must be an OS user name: %s", quote(t.RunAsUser), RunAsUserRule)
	}
	if t.Pool != "" && !ValidPoolName(t.Pool) {
		add("pool", "%s must be a pool name: %s", quote(t.Pool), PoolNameRule)
	}
	if w := t.PriorityWeight; w != nil && (*w > MaxPriorityWeight || *w < -MaxPriorityWeight) {
		add("priority_weight", "must be between %d and %d (got %d)", -MaxPriorityWeight, MaxPriorityWeight, *w)
	}
}

// PoolNameRule is the shape of a task pool's name, the same as an id's
// (ValidID): a task's pool field and `vigil pools set` both check it.
const PoolNameRule = idRule

// ValidPoolName reports whether s has the shape PoolNameRule states.
func ValidPoolName(s string) bool { return ValidID(s) }

// RunAsUserRule is the shape of Task.RunAsUser: the portable user name of
// POSIX and useradd's default NAME_REGEX, so that no name the agent looks
// up can be a path, an option or a uid.
const RunAsUserRule = "1 to 32 characters, a lower-case letter or '_' first, then lower-case letters, digits, '_' or '-'"

// ValidUserName reports whether s has the shape RunAsUserRule states.
func ValidUserName(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z':
		case i > 0 && (r == '-' || r >= '0' && r <= '9'):
		default:
			return false
		}
	}
	return true
}

// cycles reports dependency cycles found by a depth-first search in
// declaration order. Every cyclic graph has a back edge, so at least one
// cycle is reported when there is any; each is rotated to start at its
// earliest declared task, so the report is stable.
func (v *validator) cycles(tasks []Task, first map[string]int) {
	n := len(tasks)
	deps := make([][]int, n) // edges i -> j: task i depends on task j
	for i, t := range tasks {
		if first[t.ID] != i {
			continue // a duplicate id; its dependents point at the first one
		}
		seen := make(map[int]bool, len(t.DependsOn))
		for _, d := range t.DependsOn {
			if j, ok := first[d]; ok && j != i && !seen[j] {
				seen[j] = true
				deps[i] = append(deps[i], j)
			}
		}
	}

	const (
		unvisited = iota
		onStack
		done
	)
	state := make([]int, n)
	type frame struct{ node, next int }
	var stack []frame
	reported := map[string]bool{}
	shown, hidden := 0, false
	for root := range n {
		if state[root] != unvisited {
			continue
		}
		stack = append(stack[:0], frame{node: root})
		state[root] = onStack
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(deps[top.node]) {
				state[top.node] = done
				stack = stack[:len(stack)-1]
				continue
			}
			j := deps[top.node][top.next]
			top.next++
			switch state[j] {
			case unvisited:
				state[j] = onStack
				stack = append(stack, frame{node: j})
			case onStack:
				start := len(stack) - 1
				for stack[start].node != j {
					start--
				}
				cycle := make([]int, 0, len(stack)-start)
				for _, f := range stack[start:] {
					cycle = append(cycle, f.node)
				}
				low := slices.Index(cycle, slices.Min(cycle))
				cycle = append(cycle[low:], cycle[:low]...)
				key := fmt.Sprint(cycle)
				if reported[key] {
					continue
				}
				reported[key] = true
				if shown == maxCyclesShown {
					hidden = true
					continue
				}
				shown++
				head := cycle[0]
				v.problems = append(v.problems, Problem{
					Task: tasks[head].ID, Index: head, Field: "depends_on",
					Rule: "dependency cycle " + cyclePath(tasks, cycle),
				})
			}
		}
	}
	if hidden {
		v.dagf("depends_on", "more dependency cycles not shown; fix the ones above and validate again")
	}
}

// maxCyclePath is how many tasks of a cycle its path shows; a longer one
// is elided in the middle, as a 10000-task ring would flood the message.
const maxCyclePath = 16

// cyclePath renders a cycle as "a -> b -> c -> a".
func cyclePath(tasks []Task, cycle []int) string {
	var b strings.Builder
	for i, k := range cycle {
		if len(cycle) > maxCyclePath && i == maxCyclePath-4 {
			fmt.Fprintf(&b, "... (%d more) -> ", len(cycle)-maxCyclePath)
		}
		if len(cycle) > maxCyclePath && i >= maxCyclePath-4 && i < len(cycle)-4 {
			continue
		}
		b.WriteString(cycleName(tasks[k].ID))
		b.WriteString(" -> ")
	}
	b.WriteString(cycleName(tasks[cycle[0]].ID))
	return b.String()
}

// cycleName shows an id bare when it is valid (the common case, and what
// the user wrote) and quoted otherwise.
func cycleName(id string) string {
	if ValidID(id) {
		return id
	}
	return quote(id)
}

// textRule returns why s cannot be stored and passed on, or "".
func textRule(s string) string {
	switch {
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "must not contain NUL bytes"
	}
	return ""
}

// durationRule returns why d is out of [0, limit], or "".
func durationRule(d Duration, limit time.Duration) string {
	switch {
	case d < 0:
		return fmt.Sprintf("must not be negative; got %s", d)
	case d.D() > limit:
		return fmt.Sprintf("must be at most %s; got %s", humanLimit(limit), d)
	}
	return ""
}

// humanLimit writes whole-hour limits as "24h" or "168h (7 days)" rather
// than "24h0m0s".
func humanLimit(d time.Duration) string {
	if d%time.Hour != 0 {
		return d.String()
	}
	h := int64(d / time.Hour)
	if h > 24 && h%24 == 0 {
		return fmt.Sprintf("%dh (%d days)", h, h/24)
	}
	return fmt.Sprintf("%dh", h)
}

package dag

import (
	"container/heap"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Limits and defaults of a spec (docs/design.md §9). They bound what one DAG may ask
// of the scheduler and what one API request may make [Parse] do.
const (
	// MaxSpecBytes is the largest YAML input Parse accepts: 1 MiB.
	MaxSpecBytes = 1 << 20
	// MaxTasks is the largest number of tasks in one DAG.
	MaxTasks = 10000
	// DefaultMaxActiveTasks is what MaxActiveTasks means when it is 0.
	DefaultMaxActiveTasks = 16
	// MaxMaxActiveTasks is the largest MaxActiveTasks.
	MaxMaxActiveTasks = 10000
	// MaxEnvVars is the most variables one Task.Env may set. It also caps
	// the keys of any YAML mapping, which keeps Parse cheap.
	MaxEnvVars = 256
	// MaxRetries is the largest Task.Retries.
	MaxRetries = 100
	// DefaultMaxRetryDelay is what Task.MaxRetryDelay means when it is 0
	// and Task.RetryExponentialBackoff is set.
	DefaultMaxRetryDelay = time.Hour
	// RetryDelayLimit bounds Task.RetryDelay and Task.MaxRetryDelay.
	RetryDelayLimit = 24 * time.Hour
	// ExecutionTimeoutLimit bounds Task.ExecutionTimeout.
	ExecutionTimeoutLimit = 7 * 24 * time.Hour
	// RunTimeoutLimit bounds Spec.Timeout.
	RunTimeoutLimit = 30 * 24 * time.Hour
	// DefaultMaxActiveRuns is what MaxActiveRuns means when it is 0 on a
	// scheduled DAG (docs/schedules.md).
	DefaultMaxActiveRuns = 16
	// MaxMaxActiveRuns is the largest MaxActiveRuns.
	MaxMaxActiveRuns = 10000
)

// idPattern is the shape of dag_id and task ids: it is safe in URLs, file
// names, metric labels and log lines without escaping. Their length
// (maxIDLen) is checked apart: a `{0,249}` repeat compiles to 249 copies
// of the class, about 3 ms at the start of every vigil process, each
// task's supervisor included.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// maxIDLen bounds dag_id and task ids, in characters (all ASCII).
const maxIDLen = 250

// ValidID reports whether id is a valid dag_id or task id: 1 to 250
// characters of [A-Za-z0-9_.-], the first a letter or digit (docs/design.md §9).
func ValidID(id string) bool { return len(id) <= maxIDLen && idPattern.MatchString(id) }

// Spec is one DAG (docs/design.md §3, §9): the unit users apply and trigger. The
// YAML and JSON field names are the contract; JSON writes every numeric
// field so that stored specs are explicit.
type Spec struct {
	// DAGID names the DAG; see ValidID for its shape.
	DAGID string `yaml:"dag_id" json:"dag_id"`
	// Description is free text for humans.
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Timeout bounds a whole run; past it, the run's unfinished task
	// instances are cancelled with reason run_timeout (docs/design.md §3). 0 means
	// no limit; at most RunTimeoutLimit.
	Timeout Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// MaxActiveTasks caps the task instances of one run that are queued or
	// running at once. 0 (omitted) means DefaultMaxActiveTasks, which
	// ApplyDefaults fills in; at most MaxMaxActiveTasks.
	MaxActiveTasks int `yaml:"max_active_tasks,omitempty" json:"max_active_tasks"`
	// Schedule makes the DAG run on its own (docs/schedules.md): a cron
	// expression of five fields, a descriptor (@hourly, @daily, @weekly,
	// @monthly, @yearly) or "@every DURATION". Empty: manual runs only.
	Schedule string `yaml:"schedule,omitempty" json:"schedule,omitempty"`
	// Timezone is the IANA zone the schedule is read in, e.g.
	// "Europe/Berlin"; empty means UTC. DST is the time package's.
	Timezone string `yaml:"timezone,omitempty" json:"timezone,omitempty"`
	// StartDate is the earliest logical date (RFC 3339); required with
	// Schedule.
	StartDate string `yaml:"start_date,omitempty" json:"start_date,omitempty"`
	// EndDate, if set (RFC 3339), is the last logical date a slot may have.
	EndDate string `yaml:"end_date,omitempty" json:"end_date,omitempty"`
	// Catchup creates every missed slot, oldest first; without it only
	// the latest due slot runs.
	Catchup bool `yaml:"catchup,omitempty" json:"catchup,omitempty"`
	// MaxActiveRuns caps the runs of this DAG that are running at once;
	// more wait in queued. 0 means DefaultMaxActiveRuns on a scheduled DAG
	// and no cap on an unscheduled one (see EffectiveMaxActiveRuns); at
	// most MaxMaxActiveRuns.
	MaxActiveRuns int `yaml:"max_active_runs,omitempty" json:"max_active_runs,omitempty"`
	// Paused is the schedule's initial state when the DAG is first
	// applied; later applies do not change it.
	Paused bool `yaml:"paused,omitempty" json:"paused,omitempty"`
	// Params declares the run parameters a trigger's conf may set, by
	// name (see ParamKeyRule and CheckConf). Empty: any valid key.
	Params map[string]Param `yaml:"params,omitempty" json:"params,omitempty"`
	// SLA, when set, is how long a run may take to finish, counted from
	// the end of its data interval (a scheduled run) or from when it was
	// queued (a manual run); a run still live past it raises sla_missed
	// once (docs/notifications.md). At most SLALimit.
	SLA Duration `yaml:"sla,omitempty" json:"sla,omitempty"`
	// Notify sends events of this DAG's runs to webhooks; at most
	// MaxNotifyRules entries (docs/notifications.md).
	Notify []NotifyRule `yaml:"notify,omitempty" json:"notify,omitempty"`
	// Tasks lists the tasks in declaration order, which TopoOrder uses to
	// break ties. At least one, at most MaxTasks.
	Tasks []Task `yaml:"tasks" json:"tasks"`
}

// Task is one node of a DAG: a command run on an agent once its upstream
// tasks have ended as its trigger rule asks (by default, all succeeded).
type Task struct {
	// ID names the task, unique within its DAG; see ValidID.
	ID string `yaml:"id" json:"id"`
	// DependsOn lists the ids of the task's upstreams, which its
	// TriggerRule judges.
	DependsOn []string `yaml:"depends_on,omitempty" json:"depends_on,omitempty"`
	// Command is the argv to execute, with no shell unless it names one
	// (e.g. ["sh", "-c", "..."]). Command[0] must be non-empty.
	Command []string `yaml:"command" json:"command"`
	// Env adds variables to the task's environment; at most MaxEnvVars.
	// Each value is a plain string or names a secret ({secret: NAME}),
	// whose value only the claiming agent receives.
	Env map[string]EnvValue `yaml:"env,omitempty" json:"env,omitempty"`
	// Tags are the agent tags the task requires: only an agent with all of
	// them may run it.
	Tags []string `yaml:"tags,omitempty" json:"tags,omitempty"`
	// Retries is how many more tries a failed task gets, 0 to MaxRetries.
	// A task runs at most Retries+1 times.
	Retries int `yaml:"retries,omitempty" json:"retries"`
	// RetryDelay is the wait before a retry; at most RetryDelayLimit.
	RetryDelay Duration `yaml:"retry_delay,omitempty" json:"retry_delay"`
	// RetryExponentialBackoff doubles the delay on every retry, starting at
	// RetryDelay and capped at MaxRetryDelay.
	RetryExponentialBackoff bool `yaml:"retry_exponential_backoff,omitempty" json:"retry_exponential_backoff"`
	// MaxRetryDelay caps the exponential delay; ApplyDefaults sets it to
	// DefaultMaxRetryDelay when it is 0 and RetryExponentialBackoff is set.
	// At most RetryDelayLimit.
	MaxRetryDelay Duration `yaml:"max_retry_delay,omitempty" json:"max_retry_delay"`
	// ExecutionTimeout bounds one try; a try past it fails with reason
	// execution_timeout. 0 means no limit; at most ExecutionTimeoutLimit.
	ExecutionTimeout Duration `yaml:"execution_timeout,omitempty" json:"execution_timeout"`
	// RunAsUser names the OS user the task runs as on its agent, instead of
	// the agent's --task-user (docs/task-environment.md). The agent runs it
	// only when the name is in its --task-users-allowed and fails the try
	// with start_failed otherwise. Empty: the agent's choice. See
	// RunAsUserRule for its shape.
	RunAsUser string `yaml:"run_as_user,omitempty" json:"run_as_user,omitempty"`
	// TriggerRule says which upstream states let the task run
	// (docs/trigger-rules.md); empty means all_success.
	TriggerRule TriggerRule `yaml:"trigger_rule,omitempty" json:"trigger_rule,omitempty"`
	// SkipExitCode, if not 0, is the exit code (1 to 255) that ends a try
	// skipped instead of failed, without a retry.
	SkipExitCode ExitCode `yaml:"skip_exit_code,omitempty" json:"skip_exit_code,omitempty"`
	// Pool names the task pool whose slots the task's running tries
	// occupy (docs/pools.md); empty: none. The pool must exist when the
	// DAG is applied (`vigil pools set`). See PoolNameRule.
	Pool string `yaml:"pool,omitempty" json:"pool,omitempty"`
	// PriorityWeight orders the claims of queued TIs, higher first, then
	// the oldest (Airflow's priority_weight with weight_rule absolute).
	// nil means DefaultPriorityWeight; see EffectivePriorityWeight. At
	// most MaxPriorityWeight in absolute value.
	PriorityWeight *int `yaml:"priority_weight,omitempty" json:"priority_weight,omitempty"`
}

// DefaultPriorityWeight is a task's priority_weight when it sets none,
// as in Airflow.
const DefaultPriorityWeight = 1

// MaxPriorityWeight bounds |priority_weight|: PostgreSQL's integer range,
// where the claim's index orders by its negation.
const MaxPriorityWeight = 2147483647

// EffectivePriorityWeight is PriorityWeight, or DefaultPriorityWeight when
// it is not set.
func (t *Task) EffectivePriorityWeight() int {
	if t.PriorityWeight == nil {
		return DefaultPriorityWeight
	}
	return *t.PriorityWeight
}

// Pools lists the distinct pools the spec's tasks name, sorted.
func (s *Spec) Pools() []string {
	var out []string
	for i := range s.Tasks {
		if p := s.Tasks[i].Pool; p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// ApplyDefaults fills in the defaults that the zero values stand for
// (MaxActiveTasks, MaxRetryDelay) and turns empty lists and maps into nil,
// so that a spec compares equal to itself after a YAML or JSON round trip.
// Parse calls it; call it on specs built or decoded any other way before
// storing or scheduling them. It does not validate.
func (s *Spec) ApplyDefaults() {
	if s.MaxActiveTasks == 0 {
		s.MaxActiveTasks = DefaultMaxActiveTasks
	}
	if len(s.Tasks) == 0 {
		s.Tasks = nil
	}
	for i := range s.Tasks {
		t := &s.Tasks[i]
		if t.RetryExponentialBackoff && t.MaxRetryDelay == 0 {
			t.MaxRetryDelay = Duration(DefaultMaxRetryDelay)
		}
		if len(t.DependsOn) == 0 {
			t.DependsOn = nil
		}
		if len(t.Command) == 0 {
			t.Command = nil
		}
		if len(t.Env) == 0 {
			t.Env = nil
		}
		if len(t.Tags) == 0 {
			t.Tags = nil
		}
	}
}

// EffectiveMaxActiveRuns is the cap on running runs of this DAG: the
// MaxActiveRuns set, else DefaultMaxActiveRuns when the DAG has a
// Schedule, else 0 (no cap).
func (s *Spec) EffectiveMaxActiveRuns() int {
	switch {
	case s.MaxActiveRuns > 0:
		return s.MaxActiveRuns
	case s.Schedule != "":
		return DefaultMaxActiveRuns
	}
	return 0
}

// TopoOrder returns the task ids in an order where every task comes after
// the tasks it depends on. It is stable: among tasks that are ready at the
// same time, the one declared first comes first, so a chain keeps its
// declaration order and the result is the same on every call.
//
// TopoOrder is meant for valid specs. On an invalid one it still returns
// every task exactly once and does not panic: unknown dependencies are
// ignored, a duplicate id refers to its first declaration, and tasks on or
// behind a cycle follow the others in declaration order.
func (s *Spec) TopoOrder() []string {
	n := len(s.Tasks)
	first := make(map[string]int, n)
	for i, t := range s.Tasks {
		if _, ok := first[t.ID]; !ok {
			first[t.ID] = i
		}
	}
	indeg := make([]int, n)
	down := make([][]int, n) // down[j]: tasks that depend on task j
	for i, t := range s.Tasks {
		seen := make(map[int]bool, len(t.DependsOn))
		for _, dep := range t.DependsOn {
			j, ok := first[dep]
			if !ok || j == i || seen[j] {
				continue
			}
			seen[j] = true
			indeg[i]++
			down[j] = append(down[j], i)
		}
	}
	ready := make(intHeap, 0, n)
	for i := range n {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	heap.Init(&ready)
	order := make([]string, 0, n)
	placed := make([]bool, n)
	for ready.Len() > 0 {
		i := heap.Pop(&ready).(int)
		placed[i] = true
		order = append(order, s.Tasks[i].ID)
		for _, k := range down[i] {
			if indeg[k]--; indeg[k] == 0 {
				heap.Push(&ready, k)
			}
		}
	}
	for i := range n {
		if !placed[i] {
			order = append(order, s.Tasks[i].ID)
		}
	}
	return order
}

// intHeap is a min-heap of task indexes: the earliest declared ready task
// is taken first.
type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// maxShown is how many bytes of a user-supplied string an error message
// quotes; the rest is elided so that a 1 MiB value cannot flood a log.
const maxShown = 64

// truncate shortens s to about maxShown bytes on a rune boundary, marking
// the cut with "...".
func truncate(s string) string {
	if len(s) <= maxShown {
		return s
	}
	cut := maxShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// quote returns s Go-quoted for an error message, truncated to about
// maxShown bytes with "..." after the closing quote.
func quote(s string) string {
	if len(s) <= maxShown {
		return strconv.Quote(s)
	}
	t := truncate(s)
	return strconv.Quote(t[:len(t)-3]) + "..."
}

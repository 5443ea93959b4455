package agent

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/outputs"
)

// DefaultTaskEnvAllow is the comma-separated allow-list of the agent's
// environment variables that a task inherits when Config.TaskEnvAllow is
// nil (and the default of `vigil agent --task-env-allow`). A name ending in
// "*" is a prefix: LC_* passes LC_ALL, LC_CTYPE and the other locale
// variables. These are what a shell command needs to find programs, its
// home directory, its locale, its temporary directory and its time zone,
// and what identifies the user it runs as; none of them carries a
// credential. Everything else in the agent's environment, and in
// particular its VIGIL_* configuration (VIGIL_TOKEN and any other token),
// never reaches a task.
const DefaultTaskEnvAllow = "PATH,HOME,LANG,LC_*,TMPDIR,TZ,USER,LOGNAME,SHELL"

// DefaultTaskEnvAllowList returns DefaultTaskEnvAllow split into names.
func DefaultTaskEnvAllowList() []string { return strings.Split(DefaultTaskEnvAllow, ",") }

// Task identity variables the agent sets for every task (docs/design.md §4). A
// task's env cannot override them.
const (
	EnvRunID     = "VIGIL_RUN_ID"     // the run's id, decimal
	EnvDAGID     = "VIGIL_DAG_ID"     // the DAG's id
	EnvTaskID    = "VIGIL_TASK_ID"    // the task's id within the DAG
	EnvTryNumber = "VIGIL_TRY_NUMBER" // the try this attempt is, from 1
	EnvAttemptID = "VIGIL_ATTEMPT_ID" // the attempt's UUID
	EnvTIID      = "VIGIL_TI_ID"      // the task instance's id, decimal

	// EnvRunType is the run's type: manual, scheduled or backfill
	// (docs/schedules.md); manual when the server predates schedules.
	EnvRunType = "VIGIL_RUN_TYPE"
	// EnvLogicalDate, EnvDataIntervalStart and EnvDataIntervalEnd are the
	// run's slot in RFC 3339 (UTC); set but empty for a manual run.
	EnvLogicalDate       = "VIGIL_LOGICAL_DATE"
	EnvDataIntervalStart = "VIGIL_DATA_INTERVAL_START"
	EnvDataIntervalEnd   = "VIGIL_DATA_INTERVAL_END"
)

// EnvOutput names the file a task may append its outputs to
// (docs/task-environment.md, "Outputs").
const EnvOutput = "VIGIL_OUTPUT"

// EnvParamPrefix prefixes a run parameter's key, upper-cased, in the task
// variable that carries it: conf key dry_run is VIGIL_PARAM_DRY_RUN.
const EnvParamPrefix = "VIGIL_PARAM_"

// validParamKey is the param key rule (^[a-z][a-z0-9_]*$); the agent
// drops any other key a server sends.
func validParamKey(k string) bool {
	if k == "" || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// envTime formats a slot time for a task: RFC 3339 in UTC, or "" for nil.
func envTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// reservedEnvPrefix is the namespace of Vigil's own configuration, tokens
// included (every flag reads VIGIL_<FLAG_NAME>). No allow-list entry may
// reach into it; the task identity variables above are set, not inherited.
const reservedEnvPrefix = "VIGIL_"

// normalizeTaskEnvAllow validates an allow-list: each entry is a variable
// name ([A-Za-z_][A-Za-z0-9_]*), optionally followed by "*" to match a
// prefix of at least one character, outside the VIGIL_ namespace. nil
// takes DefaultTaskEnvAllow; an empty, non-nil list passes nothing.
func normalizeTaskEnvAllow(in []string) ([]string, error) {
	if in == nil {
		return DefaultTaskEnvAllowList(), nil
	}
	out := make([]string, 0, len(in))
	for i, e := range in {
		field := fmt.Sprintf("TaskEnvAllow[%d]", i)
		name := strings.TrimSuffix(e, "*")
		if !validEnvName(name) {
			return nil, fieldErr(field, fmt.Sprintf("%q must be a variable name (letters, digits, '_', not starting with a digit), optionally followed by '*' for a prefix", e))
		}
		prefix := name != e
		if strings.HasPrefix(name, reservedEnvPrefix) || prefix && strings.HasPrefix(reservedEnvPrefix, name) {
			return nil, fieldErr(field, fmt.Sprintf("%q must not match VIGIL_* variables: they hold the agent's configuration and tokens", e))
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// envAllowed reports whether the variable name passes the allow-list.
func envAllowed(allow []string, name string) bool {
	for _, a := range allow {
		if p, ok := strings.CutSuffix(a, "*"); ok {
			if strings.HasPrefix(name, p) {
				return true
			}
		} else if name == a {
			return true
		}
	}
	return false
}

// taskEnv builds a task's whole environment: the allowed variables of the
// agent's environment base, then user (HOME, USER and LOGNAME of the task
// user, sorted by name; nil without one), then the task's env (sorted by
// name), then its secrets (ClaimedTask.Secrets), then the identity
// variables, its params, its inputs (ClaimedTask.Inputs, each
// VIGIL_INPUT_*) and VIGIL_OUTPUT, the path output (unset when "").
// A later entry wins over an earlier one with the same name,
// and the result holds each name once, so the DAG's env overrides an
// inherited PATH and nothing overrides VIGIL_RUN_ID.
func taskEnv(allow, base []string, user map[string]string, t protocol.ClaimedTask, output string) []string {
	var env []string
	index := map[string]int{}
	set := func(k, v string) {
		if i, ok := index[k]; ok {
			env[i] = k + "=" + v
			return
		}
		index[k] = len(env)
		env = append(env, k+"="+v)
	}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" && envAllowed(allow, k) {
			set(k, v)
		}
	}
	for _, vars := range []map[string]string{user, t.Env} {
		keys := make([]string, 0, len(vars))
		for k := range vars {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			set(k, vars[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Secrets)) {
		set(k, t.Secrets[k])
	}
	set(EnvRunID, strconv.FormatInt(t.RunID, 10))
	set(EnvDAGID, t.DAGID)
	set(EnvTaskID, t.TaskID)
	set(EnvTryNumber, strconv.Itoa(t.TryNumber))
	set(EnvAttemptID, t.AttemptID)
	set(EnvTIID, strconv.FormatInt(t.TIID, 10))
	runType := t.RunType
	if runType == "" {
		runType = "manual"
	}
	set(EnvRunType, runType)
	set(EnvLogicalDate, envTime(t.LogicalDate))
	set(EnvDataIntervalStart, envTime(t.DataIntervalStart))
	set(EnvDataIntervalEnd, envTime(t.DataIntervalEnd))
	params := make([]string, 0, len(t.Params))
	for k := range t.Params {
		params = append(params, k)
	}
	slices.Sort(params)
	for _, k := range params {
		if validParamKey(k) {
			set(EnvParamPrefix+strings.ToUpper(k), t.Params[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Inputs)) {
		if strings.HasPrefix(k, outputs.InputPrefix) && validEnvName(k) { // the server's names; nothing else
			set(k, t.Inputs[k])
		}
	}
	if output != "" {
		set(EnvOutput, output)
	}
	return env
}

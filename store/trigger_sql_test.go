package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
	"github.com/vigil-sched/vigil/trigger"
)

// The scheduler's SQL decides as trigger.Decide does, for every rule and
// every mix of upstream states: one upstream TI in each state, and each
// subset of them as the upstreams of a TI under each rule.
func TestTriggerSQLMatchesDecide(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	states := state.TIStates()
	var spec strings.Builder
	spec.WriteString("dag_id: states\ntasks:\n")
	for _, s := range states {
		fmt.Fprintf(&spec, "  - id: %s\n    command: [\"true\"]\n", s)
	}
	e.apply(spec.String())
	run := e.trigger("states")
	_, err := e.raw.Exec(e.ctx, `UPDATE task_instances SET state = task_id WHERE run_id = $1`, run)
	require.NoError(t, err)

	type probe struct {
		rule trigger.Rule
		up   []string
		want trigger.Decision
	}
	var probes []probe
	var batch pgx.Batch
	for _, r := range trigger.Rules() {
		for mask := range 1 << len(states) {
			var up []string
			var c trigger.Counts
			for i, s := range states {
				if mask&(1<<i) != 0 {
					up = append(up, string(s))
					c.Add(s)
				}
			}
			probes = append(probes, probe{r, up, trigger.Decide(r, c)})
			batch.Queue(`SELECT `+store.DecisionSQLForTest+`
				FROM (SELECT $1::bigint AS run_id, $2::text[] AS upstream, $3::text AS trigger_rule) ti`,
				run, up, string(r))
		}
	}
	res := e.raw.SendBatch(e.ctx, &batch)
	defer res.Close()
	for _, p := range probes {
		var got string
		require.NoError(t, res.QueryRow().Scan(&got))
		if !assert.Equal(t, store.DecisionSQLValueForTest(p.want), got, "%s over %v", p.rule, p.up) {
			return
		}
	}
}

// end sets a TI's state by hand as an agent's completion would: the
// state, and the run marked dirty.
func (e *schedEnv) end(run int64, task string, st state.TI) {
	e.t.Helper()
	_, err := e.raw.Exec(e.ctx, `
		WITH u AS (UPDATE task_instances SET state = $3, end_date = now() WHERE run_id = $1 AND task_id = $2 RETURNING run_id)
		INSERT INTO run_dirty (run_id) SELECT run_id FROM u`, run, task, string(st))
	require.NoError(e.t, err)
}

// tiState reads one TI's state, reason and message.
func (e *schedEnv) tiState(run int64, task string) (st, reason, msg string) {
	e.t.Helper()
	require.NoError(e.t, e.raw.QueryRow(e.ctx, `SELECT state, coalesce(reason, ''), coalesce(message, '')
		FROM task_instances WHERE run_id = $1 AND task_id = $2`, run, task).Scan(&st, &reason, &msg))
	return st, reason, msg
}

const triggerDAG = `dag_id: rules
tasks:
  - {id: extract, command: ["true"]}
  - {id: lookup, command: ["true"]}
  - {id: load, depends_on: [extract, lookup], command: ["true"]}
  - {id: report, depends_on: [load], command: ["true"]}
  - {id: cleanup, depends_on: [extract, lookup], trigger_rule: all_done, command: ["true"]}
  - {id: alert, depends_on: [extract, lookup], trigger_rule: one_failed, command: ["true"]}
  - {id: fallback, depends_on: [extract, lookup], trigger_rule: one_success, command: ["true"]}
`

// A failure: all_success dependents are upstream_failed down the chain
// in one pass, the all_done cleanup and the one_failed alert run, and
// the run ends failed although its last tasks succeeded.
func TestTriggerRulesAfterAFailure(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(triggerDAG)
	run := e.trigger("rules")
	e.tick()
	assert.ElementsMatch(t, []string{"extract", "lookup"}, e.tasksIn(run, "queued"))

	e.end(run, "extract", state.TIFailed)
	res := e.tick()
	assert.Equal(t, 2, res.Resolved, "load and then report, in one pass")
	st, reason, msg := e.tiState(run, "report")
	assert.Equal(t, []string{"upstream_failed", "upstream_failed", "upstream failed: load upstream_failed"}, []string{st, reason, msg})
	assert.ElementsMatch(t, []string{"lookup", "alert"}, e.tasksIn(run, "queued"), "one_failed runs at the first failure")
	assert.Equal(t, []string{"cleanup", "fallback"}, e.tasksIn(run, "none"), "all_done and one_success wait for lookup")

	e.end(run, "lookup", state.TISuccess)
	e.tick()
	assert.ElementsMatch(t, []string{"alert", "cleanup", "fallback"}, e.tasksIn(run, "queued"))
	for _, task := range []string{"alert", "cleanup", "fallback"} {
		e.end(run, task, state.TISuccess)
	}
	e.tick()
	assert.Equal(t, "failed", e.runState(run), "a failed TI fails the run whatever ran after it")
	var reason2, msg2 string
	require.NoError(t, e.raw.QueryRow(e.ctx, `SELECT reason, message FROM runs WHERE id = $1`, run).Scan(&reason2, &msg2))
	assert.Equal(t, "task extract failed", msg2)
}

// No failure: the one_failed alert is skipped once its upstreams are all
// done, with reason trigger_rule and an event; the run succeeds.
func TestTriggerRulesWithoutAFailure(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(triggerDAG)
	run := e.trigger("rules")
	e.tick()
	e.end(run, "extract", state.TISuccess)
	e.tick()
	assert.ElementsMatch(t, []string{"lookup", "fallback"}, e.tasksIn(run, "queued"), "one_success runs at the first success")
	assert.Equal(t, []string{"load", "report", "cleanup", "alert"}, e.tasksIn(run, "none"))

	e.end(run, "lookup", state.TISuccess)
	res := e.tick()
	assert.Equal(t, 1, res.Resolved)
	st, reason, msg := e.tiState(run, "alert")
	assert.Equal(t, []string{"skipped", "trigger_rule", "trigger rule one_failed can never be met: extract success, lookup success"},
		[]string{st, reason, msg})
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM events WHERE run_id = $1 AND task_id = 'alert' AND kind = 'ti_skipped'`, run))

	for _, task := range []string{"load", "cleanup", "fallback"} {
		e.end(run, task, state.TISuccess)
	}
	e.tick()
	e.end(run, "report", state.TISuccess)
	e.tick()
	assert.Equal(t, "success", e.runState(run), "success and skipped TIs only")
}

// A skip propagates through all_success dependents in one pass and
// stops at none_failed, which runs; all_skipped runs only on skips.
func TestSkippedPropagates(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(`dag_id: skips
tasks:
  - {id: gate, command: ["true"]}
  - {id: work, depends_on: [gate], command: ["true"]}
  - {id: more, depends_on: [work], command: ["true"]}
  - {id: join, depends_on: [more], trigger_rule: none_failed, command: ["true"]}
  - {id: min1, depends_on: [more], trigger_rule: none_failed_min_one_success, command: ["true"]}
  - {id: noskip, depends_on: [more], trigger_rule: none_skipped, command: ["true"]}
  - {id: onskip, depends_on: [gate], trigger_rule: all_skipped, command: ["true"]}
`)
	run := e.trigger("skips")
	e.tick()
	e.end(run, "gate", state.TISkipped)
	res := e.tick()
	assert.Equal(t, 4, res.Resolved, "work, more, then min1 and noskip")
	assert.Equal(t, []string{"work", "more", "min1", "noskip"}, e.tasksIn(run, "skipped")[1:])
	assert.ElementsMatch(t, []string{"join", "onskip"}, e.tasksIn(run, "queued"))
	_, _, msg := e.tiState(run, "work")
	assert.Equal(t, "trigger rule all_success can never be met: gate skipped", msg)
}

// A try that exits with its task's skip_exit_code ends skipped with
// reason skip_exit_code and no retry, and its all_success dependents are
// skipped; any other exit code, or a kill, still fails the try.
func TestSkipExitCode(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	agentID := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 10})
	e.apply(`dag_id: skipcode
tasks:
  - {id: check, skip_exit_code: 99, retries: 2, retry_delay: 1h, command: ["true"]}
  - {id: load, depends_on: [check], command: ["true"]}
  - {id: join, depends_on: [check], trigger_rule: none_failed, command: ["true"]}
`)
	complete := func(c store.Completion) state.TI {
		t.Helper()
		run := e.trigger("skipcode")
		e.tick()
		tasks, err := e.st.Claim(e.ctx, agentID, 10) // with the join TIs of earlier runs
		require.NoError(t, err)
		for _, task := range tasks {
			if task.RunID == run && task.TaskID == "check" {
				c.Attempt = task.Attempt
			}
		}
		require.NotEmpty(t, c.Attempt.AttemptID, "claimed check of run %d among %+v", run, tasks)
		got, _, err := e.st.Complete(e.ctx, agentID, c)
		require.NoError(t, err)
		e.tick()
		return got
	}
	code := func(n int) *int { return &n }

	assert.Equal(t, state.TISkipped, complete(store.Completion{Outcome: state.OutcomeFailed, ExitCode: code(99)}))
	run := e.count(`SELECT max(id) FROM runs`)
	st, reason, msg := e.tiState(int64(run), "check")
	assert.Equal(t, []string{"skipped", "skip_exit_code", "try 1 exited with code 99, the task's skip_exit_code: skipped"},
		[]string{st, reason, msg})
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM events WHERE run_id = $1 AND task_id = 'check' AND kind = 'ti_skipped'`, run))
	st, reason, _ = e.tiState(int64(run), "load")
	assert.Equal(t, []string{"skipped", "trigger_rule"}, []string{st, reason}, "all_success skips after a skip")
	assert.Equal(t, []string{"join"}, e.tasksIn(int64(run), "queued"), "none_failed runs after a skip")

	assert.Equal(t, state.TIUpForRetry, complete(store.Completion{Outcome: state.OutcomeFailed, ExitCode: code(3)}),
		"another code fails the try")
	assert.Equal(t, state.TIUpForRetry, complete(store.Completion{Outcome: state.OutcomeFailed, ExitCode: code(99),
		Failure: state.FailureSignal, Signal: "SIGTERM"}), "a kill is no skip, whatever status is reported")
}

// Marking an upstream failed re-derives what its trigger rules ended: the
// one_failed alert the scheduler skipped (nothing had failed) returns to
// none and runs; a task that ran keeps its end.
func TestMarkFailedRunsASkippedAlert(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	e.apply(`dag_id: markalert
tasks:
  - {id: a, command: ["true"]}
  - {id: load, depends_on: [a], command: ["true"]}
  - {id: alert, depends_on: [a], trigger_rule: one_failed, command: ["true"]}
`)
	run := e.trigger("markalert")
	e.tick()
	e.end(run, "a", state.TISuccess)
	e.tick()
	e.end(run, "load", state.TISuccess)
	e.tick()
	st, reason, _ := e.tiState(run, "alert")
	require.Equal(t, []string{"skipped", "trigger_rule"}, []string{st, reason})
	require.Equal(t, "success", e.runState(run))

	res, err := e.st.MarkTI(e.ctx, store.MarkRequest{RunID: run, TaskID: "a", To: state.TIFailed, Actor: "tester"})
	require.NoError(t, err)
	assert.Equal(t, []string{"alert"}, res.Reopened)
	st, _, _ = e.tiState(run, "alert")
	assert.Equal(t, "none", st, "the skipped alert is judged again")
	e.tick()
	assert.Equal(t, []string{"alert"}, e.tasksIn(run, "queued"), "one_failed now runs")
	st, _, _ = e.tiState(run, "load")
	assert.Equal(t, "success", st, "a task that ran keeps its end")
}

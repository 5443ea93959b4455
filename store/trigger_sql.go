package store

import (
	"fmt"
	"strings"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/trigger"
)

// Trigger rules in SQL (docs/trigger-rules.md). The scheduler's
// statements evaluate trigger.Decide without leaving the database: each
// none TI ORs together the trigger.StateSeen of its upstreams (seenSQL)
// and looks its decision up in its rule's trigger.Table (decisionSQL).
// Both are rendered here from package trigger, so the SQL cannot drift
// from the function its table tests cover; TestTriggerSQLMatchesDecide
// runs them against Decide for every rule and upstream mix.

// decisionLetter is how a trigger.Decision is spelled in the rendered
// tables: one character, so a rule's table is a 32-character string.
var decisionLetter = map[trigger.Decision]byte{
	trigger.Wait: 'w', trigger.Run: 'r', trigger.Skip: 's', trigger.UpstreamFailed: 'u',
}

// decisionSQLValue is d as decisionSQL returns it, a SQL literal.
func decisionSQLValue(d trigger.Decision) string { return "'" + string(decisionLetter[d]) + "'" }

// seenSQL is the trigger.Seen of the upstreams of the TI aliased ti, an
// integer: each upstream's state is read by the (run_id, task_id) key and
// compared outside that lookup, as scheduleQueueSQL requires.
var seenSQL = func() string {
	var b strings.Builder
	b.WriteString(`(SELECT coalesce(bit_or(CASE (SELECT up.state FROM task_instances up
	                   WHERE up.run_id = ti.run_id AND up.task_id = u.task_id)`)
	for _, s := range state.TIStates() {
		if bit := trigger.StateSeen(s); bit != trigger.SeenPending {
			fmt.Fprintf(&b, " WHEN %s THEN %d", sqlValue(s), bit)
		}
	}
	fmt.Fprintf(&b, " ELSE %d END), 0) FROM unnest(ti.upstream) AS u(task_id))", trigger.SeenPending)
	return b.String()
}()

// decisionSQL is the trigger decision of the TI aliased ti, one of the
// decisionSQLValue literals: its trigger_rule's table at its seenSQL. An
// unknown rule reads all_success's table, as Decide treats it.
var decisionSQL = func() string {
	var b strings.Builder
	b.WriteString("substr(CASE ti.trigger_rule")
	for _, r := range trigger.Rules() {
		if r != trigger.Default {
			fmt.Fprintf(&b, " WHEN %s THEN '%s'", sqlValue(r), decisionTable(r))
		}
	}
	fmt.Fprintf(&b, " ELSE '%s' END, %s + 1, 1)", decisionTable(trigger.Default), seenSQL)
	return b.String()
}()

// decisionTable is rule r's trigger.Table spelled in decision letters.
func decisionTable(r trigger.Rule) string {
	t := trigger.Table(r)
	out := make([]byte, len(t))
	for i, d := range t {
		out[i] = decisionLetter[d]
	}
	return string(out)
}

package store

import "github.com/vigil-sched/vigil/trigger"

// DecisionSQLForTest is decisionSQL, over a row aliased ti with run_id,
// upstream and trigger_rule.
var DecisionSQLForTest = decisionSQL

// DecisionSQLValueForTest is how decisionSQL spells d.
func DecisionSQLValueForTest(d trigger.Decision) string {
	return string(decisionLetter[d])
}

// Event kinds that are recovery decisions: the decision labels of
// vigil_scheduler_decisions_total (metrics.DecisionLabels, less the
// reapers' own error counters; web/console_test.go keeps the two equal).
export const decisions = new Set([
  "agent_lost", "agent_lost_requeued", "dispatch_lost", "orphan_reaped", "orphan_finalized",
  "late_completion_accepted", "late_completion_recorded", "agent_inactive", "execution_timeout", "run_timeout",
  "retention_pruned", "reconcile_repaired", "agent_lost_held", "dispatch_lost_held", "tick_pass_timeout",
]);

export function isDecision(kind) {
  return decisions.has(kind);
}

package metrics_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/state"
)

// series gathers m and returns, for the named family, each series's
// first label value and its counter or gauge value or histogram count; ok is false
// when the family is not exposed.
func series(t *testing.T, m *metrics.Metrics, name string) (map[string]float64, bool) {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		out := map[string]float64{}
		for _, s := range mf.GetMetric() {
			v := s.GetCounter().GetValue() + s.GetGauge().GetValue() + float64(s.GetHistogram().GetSampleCount())
			out[s.GetLabel()[0].GetValue()] = v
		}
		return out, true
	}
	return nil, false
}

// TestMetricsDecisionsFromZero: a fresh registry already exposes every
// counted decision at 0, per reaper list and candidate errors included,
// and never the report-only dispatch_lost_deferred.
func TestMetricsDecisionsFromZero(t *testing.T) {
	m := metrics.New()
	got, ok := series(t, m, "vigil_scheduler_decisions_total")
	if !ok {
		t.Fatal("vigil_scheduler_decisions_total is not exposed before the first decision")
	}
	want := []string{
		"agent_lost", "agent_lost_requeued", "dispatch_lost", "orphan_reaped", "orphan_finalized",
		"late_completion_accepted", "late_completion_recorded", "agent_inactive", "execution_timeout",
		"run_timeout", "retention_pruned", "reconcile_repaired", "agent_lost_held", "dispatch_lost_held", "tick_pass_timeout",
		"agent_lost_list_error", "dispatch_lost_list_error", "orphan_list_error",
		"agent_inactive_list_error", "execution_timeout_list_error", "run_timeout_list_error",
		"agent_lost_error", "dispatch_lost_error", "orphan_error",
		"agent_inactive_error", "execution_timeout_error", "run_timeout_error",
	}
	for _, d := range want {
		v, ok := got[d]
		if !ok {
			t.Errorf("decision %q is not initialised", d)
		} else if v != 0 {
			t.Errorf("decision %q starts at %v, want 0", d, v)
		}
	}
	if _, ok := got[metrics.DecisionDispatchLostDeferred]; ok {
		t.Errorf("%s is exposed; it is a dry-run label and never counted", metrics.DecisionDispatchLostDeferred)
	}
	if len(got) != len(want) {
		t.Errorf("decisions exposed: %d, want %d: %v", len(got), len(want), got)
	}
	labels := metrics.DecisionLabels()
	if len(labels) != len(want) || !reflect.DeepEqual(slices.Sorted(slices.Values(labels)), slices.Sorted(slices.Values(want))) {
		t.Errorf("DecisionLabels() = %v, want %v", labels, want)
	}
}

// TestMetricsReaperDurationFromZero: every reaper's duration histogram is
// exposed with a zero count before its first sweep.
func TestMetricsReaperDurationFromZero(t *testing.T) {
	m := metrics.New()
	counts, ok := series(t, m, "vigil_reaper_duration_seconds")
	if !ok {
		t.Fatal("vigil_reaper_duration_seconds is not exposed before the first sweep")
	}
	var got []string
	for name, n := range counts {
		if n != 0 {
			t.Errorf("%s: count %v, want 0", name, n)
		}
		got = append(got, name)
	}
	want := slices.Sorted(slices.Values(state.Strings(state.Reapers())))
	if !reflect.DeepEqual(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("reapers exposed %v, want %v", got, want)
	}
}

// TestMetricsDecideAddsToInitialised: counting a decision moves the
// initialised series instead of creating a second one.
func TestMetricsDecideAddsToInitialised(t *testing.T) {
	m := metrics.New()
	m.Decide(metrics.DecisionAgentLost)
	m.Decide(metrics.DecisionAgentLost)
	got, _ := series(t, m, "vigil_scheduler_decisions_total")
	if got[metrics.DecisionAgentLost] != 2 || got[metrics.DecisionDispatchLost] != 0 {
		t.Errorf("agent_lost = %v, dispatch_lost = %v; want 2 and 0", got[metrics.DecisionAgentLost], got[metrics.DecisionDispatchLost])
	}
}

// TestMetricsTaskInstancesFromZero: vigil_task_instances exposes queued
// and running at 0 before the leader's first count.
func TestMetricsTaskInstancesFromZero(t *testing.T) {
	got, ok := series(t, metrics.New(), "vigil_task_instances")
	if !ok {
		t.Fatal("vigil_task_instances is not exposed before the first count")
	}
	want := map[string]float64{"queued": 0, "running": 0}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("vigil_task_instances = %v, want %v", got, want)
	}
}

package reaper_test

import (
	"slices"
	"testing"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/reaper"
)

// TestMetricsReaperNamesMatch: the metrics package initialises the list
// and candidate error decisions of exactly the reapers that run, so each
// `<reaper>_list_error` and `<reaper>_error` series exists from zero.
func TestMetricsReaperNamesMatch(t *testing.T) {
	got := slices.Sorted(slices.Values(metrics.ReaperNames()))
	want := slices.Sorted(slices.Values(reaper.Names()))
	if !slices.Equal(got, want) {
		t.Fatalf("metrics.ReaperNames() = %v, reaper.Names() = %v", got, want)
	}
}

package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vigil-sched/vigil/metrics"
)

// dashboardFile is the Grafana dashboard, relative to this package.
const dashboardFile = "grafana/vigil.json"

// exportedMetricNames returns every series name a Vigil process exports:
// the families of a metrics.New() registry, with _bucket/_sum/_count for
// histograms and _sum/_count for summaries. Vectors whose label values
// only appear at run time (HTTP routes) get one child first so that
// Gather lists them.
func exportedMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New()
	m.HTTPRequests.WithLabelValues("GET /v1/runs", "200").Inc()
	m.HTTPDuration.WithLabelValues("GET /v1/runs").Observe(0.01)
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		n := mf.GetName()
		names[n] = true
		switch mf.GetType().String() {
		case "HISTOGRAM", "GAUGE_HISTOGRAM":
			names[n+"_bucket"], names[n+"_sum"], names[n+"_count"] = true, true, true
		case "SUMMARY":
			names[n+"_sum"], names[n+"_count"] = true, true
		}
	}
	return names
}

// dashboard is the part of a Grafana dashboard these tests read.
type dashboard struct {
	SchemaVersion int `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashPanel `json:"panels"`
}

// dashPanel is one panel (rows may nest panels).
type dashPanel struct {
	ID         int             `json:"id"`
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

// loadDashboard parses dashboardFile strictly enough to fail on a typo in
// the fields read.
func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// Pieces of PromQL that are not metric names.
var (
	promStringRE   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchersRE = regexp.MustCompile(`\{[^{}]*\}`)
	promRangeRE    = regexp.MustCompile(`\[[^\]]*\]`)
	promLabelsRE   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdentRE    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promKeywords   = map[string]bool{
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true,
		"Inf": true, "NaN": true,
	}
)

// metricNames returns the metric names a PromQL expression selects:
// identifiers that are not functions, keywords, label names, label values,
// durations or Grafana variables.
func metricNames(expr string) []string {
	s := promStringRE.ReplaceAllString(expr, `""`)
	s = promMatchersRE.ReplaceAllString(s, " ")
	s = promRangeRE.ReplaceAllString(s, " ")
	s = promLabelsRE.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promIdentRE.FindAllStringIndex(s, -1) {
		word := s[loc[0]:loc[1]]
		if loc[0] > 0 && (s[loc[0]-1] == '$' || s[loc[0]-1] == '.' || s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9') {
			continue // a Grafana variable or part of a number
		}
		if promKeywords[word] || strings.HasPrefix(strings.TrimSpace(s[loc[1]:]), "(") {
			continue // a keyword or a function
		}
		names = append(names, word)
	}
	return names
}

// TestMetricNamesFromPromQL pins the extraction the dashboard check uses.
func TestMetricNamesFromPromQL(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (decision) (increase(vigil_scheduler_decisions_total{job=~"$job", decision=~".+_error"}[$__rate_interval])) > 0`: {"vigil_scheduler_decisions_total"},
		`histogram_quantile(0.99, sum by (le, route) (rate(vigil_http_request_duration_seconds_bucket{job=~"$job"}[5m])))`:       {"vigil_http_request_duration_seconds_bucket"},
		`(time() - vigil_scheduler_last_tick_timestamp_seconds) and on (job, instance) (vigil_leader == 1)`:                      {"vigil_scheduler_last_tick_timestamp_seconds", "vigil_leader"},
		`sum(rate(a_total[1m])) / sum(rate(b_total[1m])) > 1e3`:                                                                  {"a_total", "b_total"},
	} {
		if got := metricNames(expr); !slices.Equal(got, want) {
			t.Errorf("metricNames(%q) = %v, want %v", expr, got, want)
		}
	}
}

// TestDashboardQueriesNameExportedMetrics: every panel of the Grafana
// dashboard has at least one query, uses the dashboard's data source
// variable, and every metric its queries (and the template variables)
// name is one Vigil really exports.
func TestDashboardQueriesNameExportedMetrics(t *testing.T) {
	d := loadDashboard(t)
	exported := exportedMetricNames(t)
	if d.SchemaVersion < 36 || d.SchemaVersion > 41 {
		t.Errorf("schemaVersion %d: want a current Grafana schema (36..41)", d.SchemaVersion)
	}
	hasDS := false
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" {
			hasDS = true
		}
		if v.Type == "query" {
			for _, n := range metricNames(strings.TrimSuffix(strings.TrimPrefix(v.Definition, "label_values("), ")")) {
				if !exported[n] && n != "job" {
					t.Errorf("variable %s: metric %s is not exported by Vigil", v.Name, n)
				}
			}
		}
	}
	if !hasDS {
		t.Error("no datasource template variable named datasource")
	}
	var panels []dashPanel
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			panels = append(panels, p)
		}
	}
	walk(d.Panels)
	if len(panels) == 0 {
		t.Fatal("no panels")
	}
	used := map[string]bool{}
	for _, p := range panels {
		if !strings.Contains(string(p.Datasource), "${datasource}") {
			t.Errorf("panel %q: datasource %s, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names := metricNames(tg.Expr)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				used[n] = true
				if !exported[n] {
					t.Errorf("panel %q: query %q names %s, which Vigil does not export", p.Title, tg.Expr, n)
				}
			}
		}
	}
	// The panels the operations story relies on.
	for _, want := range []string{
		"vigil_scheduler_decisions_total", "vigil_leader", "vigil_leader_epoch",
		"vigil_scheduler_tick_duration_seconds_bucket", "vigil_reaper_duration_seconds_bucket",
		"vigil_http_requests_total", "vigil_http_request_duration_seconds_bucket",
		"vigil_heartbeats_received_total", "vigil_task_instances",
		"vigil_schedule_lag_seconds_bucket", "vigil_schedule_runs_created_total",
	} {
		if !used[want] {
			t.Errorf("no panel queries %s", want)
		}
	}
}

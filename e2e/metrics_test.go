package e2e

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/state"
)

// TestMetricsScrapePassesPromtoolCheck scrapes /metrics of a real Lite,
// first before anything has happened and then after a run, and checks:
// every decision label is there at 0 from the first scrape (so rate()
// works from it), the report-only dispatch_lost_deferred never is, and
// `promtool check metrics` accepts both scrapes.
func TestMetricsScrapePassesPromtoolCheck(t *testing.T) {
	t.Parallel()
	promtool := promtoolPath(t)
	dags := t.TempDir()
	writeDAG(t, dags, "hello", `
dag_id: hello
tasks:
  - id: greet
    command: ["sh", "-c", "echo hello"]
`)
	writeDAG(t, dags, "slow", `
dag_id: slow
tasks:
  - id: wait
    command: ["sh", "-c", "sleep 60"]
`)
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 1, Extra: []string{"--sweep-interval", "500ms"}})

	first := metricsText(t, lite)
	decisions := sampleValues(first, "vigil_scheduler_decisions_total", "decision")
	for _, d := range metrics.DecisionLabels() {
		v, ok := decisions[d]
		if assert.True(t, ok, "first scrape has no vigil_scheduler_decisions_total{decision=%q}", d) {
			assert.Zero(t, v, "decision %s on the first scrape", d)
		}
	}
	assert.NotContains(t, decisions, metrics.DecisionDispatchLostDeferred, "a dry-run label is never counted")
	reapers := sampleValues(first, "vigil_reaper_duration_seconds_count", "reaper")
	for _, name := range state.Reapers() {
		assert.Contains(t, reapers, string(name), "first scrape has no vigil_reaper_duration_seconds{reaper=%q}", name)
	}
	promtoolCheckMetrics(t, promtool, first)

	d, code := triggerJSON(t, lite, "hello", true)
	require.Equal(t, 0, code, "runs trigger hello --wait")
	require.Equal(t, "success", d.State)

	after := metricsText(t, lite)
	assert.Equal(t, map[string]float64{"": 1}, sampleValues(after, "vigil_leader", ""), "Lite leads")
	for _, want := range []string{
		`vigil_http_requests_total{code="201",route="POST /v1/dags/{dag_id}/runs"} 1`,
		`vigil_http_request_duration_seconds_count{route="POST /v1/dags/{dag_id}/runs"} 1`,
		"vigil_scheduler_tick_duration_seconds_count ",
	} {
		assert.True(t, strings.Contains(after, want), "the scrape after a run has no %q", want)
	}
	// The agent heartbeats every second (the harness's --heartbeat-interval).
	waitFor(t, 10*time.Second, func() bool {
		return sampleValues(metricsText(t, lite), "vigil_heartbeats_received_total", "")[""] > 0
	}, "vigil_heartbeats_received_total counts the agent's heartbeats")
	lastTick := sampleValues(after, "vigil_scheduler_last_tick_timestamp_seconds", "")[""]
	assert.InDelta(t, float64(time.Now().Unix()), lastTick, 60, "the last tick is recent")
	promtoolCheckMetrics(t, promtool, after)

	// vigil_task_instances follows the live work: one running TI while
	// the slow task sleeps, none once its run is cancelled.
	slow, code := triggerJSON(t, lite, "slow", false)
	require.Equal(t, 0, code, "runs trigger slow")
	waitFor(t, 30*time.Second, func() bool {
		return sampleValues(metricsText(t, lite), "vigil_task_instances", "state")["running"] == 1
	}, `vigil_task_instances{state="running"} reaches 1 while the slow task runs`)
	out, code := cli(t, lite, "runs", "cancel", strconv.FormatInt(slow.ID, 10))
	require.Equal(t, 0, code, "runs cancel: %s", out)
	waitFor(t, 30*time.Second, func() bool {
		ti := sampleValues(metricsText(t, lite), "vigil_task_instances", "state")
		return ti["running"] == 0 && ti["queued"] == 0
	}, "vigil_task_instances drops to 0 once the run is cancelled")
}

// promtoolPath returns promtool's path, failing t (not skipping) when it
// is missing.
func promtoolPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found in PATH (%v): install Debian's prometheus package, which carries it "+
			"(make test installs it: scripts/deps.sh)", err)
	}
	return path
}

// promtoolCheckMetrics runs `promtool check metrics` on a scrape and fails
// t with its findings unless it exits 0.
func promtoolCheckMetrics(t *testing.T, promtool, scrape string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)
}

// sampleValues returns the samples of one metric in a text exposition, by
// the value of label (the key "" when label is empty: an unlabelled
// metric).
func sampleValues(scrape, name, label string) map[string]float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	var labelRE *regexp.Regexp
	if label != "" {
		labelRE = regexp.MustCompile(regexp.QuoteMeta(label) + `="([^"]*)"`)
	}
	out := map[string]float64{}
	for _, m := range re.FindAllStringSubmatch(scrape, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		key := ""
		if labelRE != nil {
			lm := labelRE.FindStringSubmatch(m[1])
			if lm == nil {
				continue
			}
			key = lm[1]
		}
		out[key] = v
	}
	return out
}

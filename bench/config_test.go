package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseConfigDefaults(t *testing.T) {
	c, err := parseConfig(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, defaultConfig(), c)
	// The scale docs/performance.md reports: 1M terminal TIs, 4,000 × 50 live.
	require.Equal(t, 1000000, c.HistoryRuns*seedWidth)
	require.Equal(t, 200000, c.LiveRuns*seedWidth)
	// Issue 27's year of history: 1M runs, 20M TIs, 20 TIs a run.
	require.Equal(t, 1000000, c.APIRuns)
	require.Equal(t, 20000000, c.APITIs)
	require.Equal(t, 20, apiWidth(c.APIRuns, c.APITIs))
}

func TestParseConfigAPIHistory(t *testing.T) {
	c, err := parseConfig([]string{"-only", "api-history", "-api-history-runs", "20000", "-api-history-tis", "400001"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "api-history", c.Only)
	require.Equal(t, 20000, c.APIRuns)
	require.Equal(t, 400001, c.APITIs)
	require.Equal(t, 21, apiWidth(c.APIRuns, c.APITIs))
	// At the limit: every run holds dag.MaxTasks TIs.
	_, err = parseConfig([]string{"-api-history-runs", "5", "-api-history-tis", "50000"}, io.Discard)
	require.NoError(t, err)
}

func TestParseConfigFlags(t *testing.T) {
	c, err := parseConfig([]string{"-burn-down", "5000", "-steady", "3s", "-heartbeat-tis", "300", "-heartbeat-agents", "3", "-keep"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 5000, c.BurnDown)
	require.Equal(t, 3*time.Second, c.Steady)
	require.Equal(t, 300, c.HeartbeatTIs)
	require.True(t, c.KeepDir)
}

func TestParseConfigErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-agents", "0"}, []string{"-agents: 0 must be at least 1"}},
		{[]string{"-lite-agents", "65"}, []string{"-lite-agents: 65 is outside 1..64"}},
		{[]string{"-lite-capacity", "0", "-steady", "500ms"}, []string{"-lite-capacity: 0 is outside 1..1024", "-steady: 500ms must be at least 1s"}},
		{[]string{"-heartbeat-tis", "1001"}, []string{"-heartbeat-tis: 1001 is not a multiple of -heartbeat-agents 100"}},
		{[]string{"-history-runs", "10"}, []string{"-history-runs: 10 runs hold 500 TIs, fewer than the 5000 that -prune-agents 500 name"}},
		{[]string{"-chain", "1"}, []string{"-chain: 1 must be at least 2"}},
		{[]string{"extra"}, []string{`unexpected argument "extra"`}},
		{[]string{"-only", "api"}, []string{`-only: "api" must be empty (every figure), log-ingest, api-history or lite`}},
		{[]string{"-api-history-runs", "4"}, []string{"-api-history-runs: 4 must be at least 5 (one run for each history DAG)"}},
		{[]string{"-api-history-runs", "100", "-api-history-tis", "99"}, []string{"-api-history-tis: 99 is fewer than -api-history-runs 100"}},
		{[]string{"-api-history-runs", "5", "-api-history-tis", "50001"}, []string{"-api-history-tis: 50001 over 5 runs is 10001 TIs a run, more than a DAG's 10000 tasks"}},
		{[]string{"-steady", "soon"}, []string{`invalid value "soon" for flag -steady`}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseConfig(tc.args, io.Discard)
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	require.Equal(t, time.Duration(5), percentile(ds, 50))
	require.Equal(t, time.Duration(10), percentile(ds, 99))
	require.Equal(t, time.Duration(1), percentile(ds, 1))
	require.Equal(t, time.Duration(0), percentile(nil, 50))
}

func TestHistMean(t *testing.T) {
	m, err := parseMetrics(bufioScanner("# HELP x\nvigil_reaper_duration_seconds_sum{reaper=\"orphan\"} 0.5\n" +
		"vigil_reaper_duration_seconds_count{reaper=\"orphan\"} 10\nvigil_leader 1\n"))
	require.NoError(t, err)
	later, err := parseMetrics(bufioScanner("vigil_reaper_duration_seconds_sum{reaper=\"orphan\"} 0.8\n" +
		"vigil_reaper_duration_seconds_count{reaper=\"orphan\"} 13\n"))
	require.NoError(t, err)
	require.Equal(t, 1.0, m["vigil_leader"])
	d, n := histMean(m, later, "vigil_reaper_duration_seconds", `{reaper="orphan"}`)
	require.Equal(t, 3, n)
	require.InDelta(t, float64(100*time.Millisecond), float64(d), float64(time.Microsecond))
	_, n = histMean(m, m, "vigil_reaper_duration_seconds", `{reaper="orphan"}`)
	require.Zero(t, n)
}

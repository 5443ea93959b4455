package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// TestTriggerRulesExample runs examples/trigger-rules.yaml three ways on
// Lite with real agents (docs/trigger-rules.md): a failure, after which
// the all_done cleanup and the one_failed alert run and the run still
// ends failed; no failure, after which the alert is skipped; and an exit
// with the skip_exit_code, which ends extract skipped without a retry
// and skips its all_success dependent.
func TestTriggerRulesExample(t *testing.T) {
	t.Parallel()
	lite := startLite(t, liteOpts{DAGs: examplesDir, Agents: 2})
	trigger := func(conf ...string) int64 {
		t.Helper()
		args := []string{"runs", "trigger", "trigger-rules", "-o", "json"}
		for _, c := range conf {
			args = append(args, "--conf", c)
		}
		out, code := cli(t, lite, args...)
		require.Equal(t, 0, code, "runs trigger: %s", out)
		var d protocol.RunDetail
		require.NoError(t, json.Unmarshal([]byte(out), &d), "runs trigger -o json: %q", out)
		return d.ID
	}
	failing, clean, skipping := trigger("fail=true"), trigger(), trigger("skip=true")

	// ended waits for the run to end and returns it with its TIs by task.
	ended := func(id int64) (protocol.RunDetail, map[string]protocol.TaskInstance, string) {
		t.Helper()
		var d protocol.RunDetail
		waitFor(t, 60*time.Second, func() bool {
			return tryGetJSON(lite, fmt.Sprintf("/v1/runs/%d", id), &d) == nil &&
				(d.State == "success" || d.State == "failed" || d.State == "cancelled")
		}, fmt.Sprintf("run %d to end (last seen %q)", id, d.State))
		tis := map[string]protocol.TaskInstance{}
		var b strings.Builder
		fmt.Fprintf(&b, "run %d %s (%s)", d.ID, d.State, d.Message)
		for _, ti := range d.TaskInstances {
			tis[ti.TaskID] = ti
			fmt.Fprintf(&b, "\n  %s %s try %d reason %q: %s", ti.TaskID, ti.State, ti.TryNumber, ti.Reason, ti.Message)
		}
		return d, tis, b.String()
	}
	states := func(tis map[string]protocol.TaskInstance) map[string]string {
		out := map[string]string{}
		for id, ti := range tis {
			out[id] = ti.State
		}
		return out
	}

	d, tis, desc := ended(failing)
	assert.Equal(t, "failed", d.State, "a failure fails the run though cleanup and alert succeeded last: %s", desc)
	assert.Equal(t, map[string]string{"extract": "failed", "load": "upstream_failed", "cleanup": "success", "alert": "success"},
		states(tis), desc)
	assert.Equal(t, "exit_code", d.Reason, desc)
	assert.Equal(t, 2, tis["extract"].TryNumber, "exit 1 is retried: %s", desc)
	if c, x := tis["cleanup"].StartedAt, tis["extract"].EndDate; assert.NotNil(t, c, desc) && assert.NotNil(t, x, desc) {
		assert.False(t, c.Before(*x), "cleanup started after extract failed: %s", desc)
	}
	logs := taskLogs(t, lite, failing, "alert")
	require.NotEmpty(t, logs.Lines, "the alert ran and logged")
	assert.Contains(t, logs.Lines[0].Line, fmt.Sprintf("alert: a task of run %d failed", failing))

	d, tis, desc = ended(clean)
	assert.Equal(t, "success", d.State, desc)
	assert.Equal(t, map[string]string{"extract": "success", "load": "success", "cleanup": "success", "alert": "skipped"},
		states(tis), desc)
	assert.Equal(t, "trigger_rule", tis["alert"].Reason, desc)
	assert.Equal(t, "trigger rule one_failed can never be met: extract success, load success", tis["alert"].Message, desc)

	d, tis, desc = ended(skipping)
	assert.Equal(t, "success", d.State, "skipped and success TIs only: %s", desc)
	assert.Equal(t, map[string]string{"extract": "skipped", "load": "skipped", "cleanup": "success", "alert": "skipped"},
		states(tis), desc)
	x := tis["extract"]
	assert.Equal(t, "skip_exit_code", x.Reason, desc)
	assert.Equal(t, 1, x.TryNumber, "a skip is not retried: %s", desc)
	if assert.NotNil(t, x.ExitCode, desc) {
		assert.Equal(t, 99, *x.ExitCode)
	}
	assert.Equal(t, "trigger_rule", tis["load"].Reason, "all_success skips after a skipped upstream: %s", desc)
	kinds := map[string]int{}
	for _, e := range runEvents(t, lite, skipping) {
		kinds[e.Kind]++
	}
	assert.Equal(t, 3, kinds["ti_skipped"], "extract, load and alert each have a ti_skipped event: %v", kinds)
}

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// consoleDAGs are the DAGs the browser test drives: a run that takes a
// few seconds, one that fails, one whose agent is killed, one no agent
// can take, and one that prints through a control-plane outage.
var consoleDAGs = map[string]string{
	"slow": "dag_id: slow\nparams:\n  rows: {type: int, default: 10}\ntasks:\n  - id: extract\n    command: [sh, -c, 'echo extracting; sleep 3']\n" +
		"  - id: load\n    depends_on: [extract]\n    trigger_rule: none_failed\n    command: [sh, -c, 'echo loading; sleep 1']\n",
	"breaks": "dag_id: breaks\ntasks:\n  - id: fetch\n    command: [sh, -c, 'echo no such file >&2; exit 3']\n" +
		"  - id: report\n    depends_on: [fetch]\n    command: ['true']\n",
	"beats":  "dag_id: beats\ntasks:\n  - id: beat\n    retries: 1\n    command: [sh, -c, 'for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do echo beat $i; sleep 0.5; done']\n",
	"gpu":    "dag_id: gpu\ntimeout: 10m\ntasks:\n  - id: train\n    tags: [gpu]\n    command: ['true']\n",
	"hint":   "dag_id: hint\ntasks:\n  - id: sit\n    tags: [hint]\n    command: [sh, -c, 'echo sitting; sleep 120']\n",
	"steady": "dag_id: steady\ntasks:\n  - id: count\n    command: [sh, -c, 'i=0; while [ $i -lt 100 ]; do i=$((i+1)); echo line $i; sleep 0.1; done']\n",
	"emit": `dag_id: emit
tasks:
  - id: emit
    command: [sh, -c, 'echo rows=12 >> "$VIGIL_OUTPUT"; printf "note<<EOF\nfirst line\nsecond line\nEOF\n" >> "$VIGIL_OUTPUT"']
  - id: use
    depends_on: [emit]
    command: [sh, -c, 'echo "rows: $VIGIL_INPUT_EMIT_ROWS"']
`,
}

// TestConsoleInABrowser drives the web console in Debian's Chromium
// against a real Lite with two remote agents: signing in, the runs list
// following a run, the graph's states, an agent_lost decision after
// kill -9, work at risk before it is reaped, a threshold rejected inline,
// the gap-marker banner after a control-plane outage, and a viewer who
// cannot cancel. It saves a screenshot of every page.
func TestConsoleInABrowser(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	for name, spec := range consoleDAGs {
		writeDAG(t, dags, name+".yaml", spec)
	}
	marker := filepath.Join(t.TempDir(), "fixed")
	writeDAG(t, dags, "history.yaml", historyDAG(marker))
	tokenFile := filepath.Join(t.TempDir(), "viewer.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(viewerToken+"\n"), 0o600))
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 0, Extra: append([]string{"--viewer-token-file", tokenFile}, shortRecovery...)})
	agents := map[int64]*proc{}
	for _, name := range []string{"host-1", "host-3"} {
		a := startAgent(t, []string{lite.URL}, agentToken, name, "--capacity", "2", "--kill-grace", killGrace.String())
		agents[agentID(t, a, 30*time.Second)] = a
	}
	b := startBrowser(t)
	t.Logf("browser: %s", chromiumVersion())

	b.open(lite.URL, "", "#token")
	b.shot("sign-in")
	b.signIn(lite.URL, operatorToken, "operator")

	t.Run("runs list follows a run", func(t *testing.T) {
		b := b.on(t)
		b.open(lite.URL, "#/runs", "#runs")
		run, code := triggerJSON(t, lite, "slow", false)
		require.Equal(t, 0, code)
		row := fmt.Sprintf(`#runs tr[data-run-id="%d"]`, run.ID)
		b.waitFor("the new run appears running", row+`[data-run-state="running"]`)
		b.shot("runs-running")
		b.waitFor("the same row turns success without a reload", row+`[data-run-state="success"]`)
		assert.Contains(t, b.text(row), "success 2", "the task summary counts both successes")
		b.shot("runs")
		b.run("dark scheme", colorScheme("dark"))
		b.shot("runs-dark")
		b.run("light scheme", colorScheme("light"))
	})

	t.Run("run detail graph shows each state", func(t *testing.T) {
		b := b.on(t)
		run, _ := triggerJSON(t, lite, "breaks", false)
		waitRunState(t, lite, run.ID, "failed", 30*time.Second)
		b.open(lite.URL, fmt.Sprintf("#/runs/%d", run.ID), `#graph svg`)
		b.waitFor("fetch is failed", `g.node[data-task="fetch"][data-state="failed"]`)
		b.waitFor("report is upstream_failed", `g.node[data-task="report"][data-state="upstream_failed"]`)
		assert.Contains(t, b.text(`g.node[data-task="report"]`), "upstream failed", "the state is written, not only coloured")
		b.shot("run-detail-failed")
	})

	t.Run("agent_lost decision on the timeline after kill -9", func(t *testing.T) {
		b := b.on(t)
		run, _ := triggerJSON(t, lite, "beats", false)
		ti := waitTI(t, lite, run.ID, "beat", 30*time.Second, "running with started_at", func(ti protocol.TaskInstance) bool {
			return ti.State == "running" && ti.StartedAt != nil && ti.AgentID != nil
		})
		victim := agents[*ti.AgentID]
		require.NotNil(t, victim)
		victim.kill(t)
		waitFor(t, 30*time.Second, func() bool {
			return findEvent(runEvents(t, lite, run.ID), func(e protocol.Event) bool { return e.Kind == "agent_lost" }) != nil
		}, "an agent_lost event")
		waitRunState(t, lite, run.ID, "success", 60*time.Second)
		b.open(lite.URL, fmt.Sprintf("#/runs/%d", run.ID), `#events`)
		sel := `#events tr[data-kind="agent_lost"][data-decision="true"]`
		b.waitFor("the agent_lost decision is marked", sel)
		why := b.text(sel)
		assert.Contains(t, why, "decision")
		assert.Regexp(t, `agent_lost: agent \S+ \(#\d+\) silent for .* after its last heartbeat at .*; retried on agent \S+ \(#\d+\) \(try 2\)`, why)
		b.waitFor("the Gantt chart marks the reaped try", `#gantt g.gantt-bar[data-try="1"][data-reaped="agent_lost"]`)
		b.waitFor("and the retry", `#gantt g.gantt-bar[data-try="2"][data-retry="true"][data-outcome="success"]`)
		assert.Equal(t, 2, b.count(`#gantt g.gantt-bar`), "one bar per try")
		assert.Contains(t, b.text(`#gantt g.gantt-bar[data-try="1"]`), "⚑ agent_lost", "the reap is written on the chart")
		b.shot("run-detail-agent-lost")
		b.open(lite.URL, "#/agents", `#agents tr[data-agent]`)
		b.shot("agents")
	})

	t.Run("work at risk appears before it is reaped", func(t *testing.T) {
		b := b.on(t)
		run, _ := triggerJSON(t, lite, "gpu", false)
		b.open(lite.URL, "#/at-risk", "#risk-queued")
		row := fmt.Sprintf(`#risk-queued tr[data-run-id="%d"]`, run.ID)
		b.waitFor("the gpu task is listed", row)
		assert.Contains(t, b.text(row), "gpu", "the missing tag is named")
		assert.Equal(t, "queued", taskInstance(t, runDetail(t, lite, run.ID), "train").State, "listed, not reaped")
		b.shot("at-risk")
		b.open(lite.URL, fmt.Sprintf("#/runs/%d", run.ID), `#tis tr[data-task="train"]`)
		b.waitFor("the run page says why train waits", `#tis tr[data-task="train"]`)
		assert.Contains(t, b.text(`#tis tr[data-task="train"]`), "no_matching_agent")
		assert.Contains(t, b.text(`#tis tr[data-task="train"]`), "no active agent offers tags [gpu]")
	})

	t.Run("the run page shows an overdue heartbeat", func(t *testing.T) {
		b := b.on(t)
		// A long agent-lost threshold, so the hint stays up: agent-lost
		// does not act for a minute. Reset before the next subtest.
		cliOK(t, lite, "thresholds", "set", "--agent-lost", "60s")
		defer cliOK(t, lite, "thresholds", "reset")
		a := startAgent(t, []string{lite.URL}, agentToken, "host-5", "--tags", "hint", "--kill-grace", killGrace.String())
		run, _ := triggerJSON(t, lite, "hint", false)
		waitTI(t, lite, run.ID, "sit", 30*time.Second, "running with started_at", func(ti protocol.TaskInstance) bool {
			return ti.State == "running" && ti.StartedAt != nil
		})
		b.open(lite.URL, fmt.Sprintf("#/runs/%d", run.ID), `#tis tr[data-task="sit"]`)
		var hints int
		b.eval(`document.querySelectorAll("#tis tr[data-overdue]").length`, &hints)
		assert.Zero(t, hints, "heartbeats on time: no hint")
		a.kill(t)
		b.waitFor("the hint appears once the heartbeat is overdue", `#tis tr[data-overdue="sit"]`)
		hint := strings.Join(strings.Fields(b.text(`#tis tr[data-overdue="sit"]`)), " ")
		assert.Regexp(t, `heartbeat overdue by \S+: agent host-5 \(#\d+\) last heartbeated at .*; agent_lost acts in \S+`, hint)
		assert.Contains(t, hint, "agent_lost", "what agent-lost will decide")
		assert.Equal(t, "running", taskInstance(t, runDetail(t, lite, run.ID), "sit").State, "hinted, not reaped")
		b.shot("run-detail-overdue")
		// Cancelled before the threshold is reset: no agent_lost decision
		// joins the one the cluster subtest counts.
		cliOK(t, lite, "runs", "cancel", strconv.FormatInt(run.ID, 10))
	})

	t.Run("a bad threshold is rejected inline", func(t *testing.T) {
		b := b.on(t)
		b.open(lite.URL, "#/cluster", "#th-agent_lost")
		b.waitFor("a replica row", `#replicas tr[data-replica]`)
		b.waitFor("the agent-lost reaper's last sweep", `#reapers tr[data-reaper="agent_lost"]`)
		assert.Regexp(t, `agent_lost\s*1$`, strings.TrimSpace(b.text(`#decisions tr[data-decision-count="agent_lost"]`)),
			"the leader counted the one agent_lost decision")
		b.run("set agent-lost to 1s", setValue("#th-agent_lost", "1s"))
		b.run("save", clickSel(`#thresholds button[type="submit"]`))
		b.waitFor("the field is marked", `#th-agent_lost.field-error`)
		msg := b.text("#th-agent_lost-error")
		assert.Contains(t, msg, "agent_lost")
		assert.Contains(t, msg, "1s")
		var th protocol.Thresholds
		getJSON(t, lite, "/v1/thresholds", &th)
		assert.Equal(t, 3*time.Second, th.AgentLost.D(), "nothing was changed")
		b.shot("cluster-threshold-error")
	})

	t.Run("gap marker banner after a control-plane outage", func(t *testing.T) {
		b := b.on(t)
		run, _ := triggerJSON(t, lite, "steady", false)
		waitFor(t, 20*time.Second, func() bool {
			var l protocol.LogList
			return tryGetJSON(lite, fmt.Sprintf("/v1/runs/%d/tasks/count/logs", run.ID), &l) == nil && len(l.Lines) >= 5
		}, "5 log lines shipped")
		b.open(lite.URL, fmt.Sprintf("#/runs/%d", run.ID), "#events")
		down := time.Now()
		lite.Stop()
		b.waitFor("the page says it cannot update", "#banner:not([hidden])")
		assert.Contains(t, b.text("#banner"), "retrying")
		b.shot("control-plane-unreachable")
		time.Sleep(4*time.Second - time.Since(down))
		lite.Restart()
		b.waitFor("the banner goes once the control plane answers", "#banner[hidden]")
		waitRunState(t, lite, run.ID, "success", 60*time.Second)
		b.open(lite.URL, fmt.Sprintf("#/runs/%d/logs/count", run.ID), `#lines .gap[data-gap="true"]`)
		banner := b.text(`#lines .gap`)
		assert.Regexp(t, `could not reach the control plane for \d+ s\. Replayed \d+ buffered events and \d+ log lines; \d+ dropped`, banner)
		var secs string
		b.run("outage length", attr(`#lines .gap`, "data-outage-seconds", &secs))
		n, err := strconv.Atoi(secs)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, n, 3, "the banner tells the outage's length")
		b.run("show the banner", chromedp.ScrollIntoView(`#lines .gap`, chromedp.ByQuery))
		b.shot("logs-gap-marker")
	})

	t.Run("trigger with parameters from the DAG page", func(t *testing.T) {
		b := b.on(t)
		b.open(lite.URL, "#/dags/slow", `#trigger input[name="rows"]`)
		// The run history above the form renders after its first poll and
		// moves the form down; chromedp clicks at the button's coordinates,
		// so a click measured before that render lands beside the button
		// (a fresh-clone make test saw no request sent, and no error
		// shown). Click once the page has its final layout.
		b.waitFor("the run history", "#grid-view > *")
		b.waitFor("the run durations", "#durations > *")
		assert.Contains(t, b.text("#dag-tasks"), "load ← extract (none_failed)", "a task's trigger rule is shown")
		b.run("a bad value", setValue(`#trigger input[name="rows"]`, "many"), clickSel("#trigger-run"))
		b.waitFor("the API's error", "#trigger-error .error")
		assert.Contains(t, b.text("#trigger-error"), "rows", "the error names the parameter")
		b.shot("dag-trigger-error")
		b.run("a good value", setValue(`#trigger input[name="rows"]`, "42"), clickSel("#trigger-run"))
		b.waitFor("the new run's page", "#run-head [data-run-state]")
		assert.Contains(t, b.text("#run-head"), `"rows":42`, "the run shows its conf")
		var runs protocol.RunList
		getJSON(t, lite, "/v1/runs?dag_id=slow&limit=1", &runs)
		require.Len(t, runs.Runs, 1)
		assert.EqualValues(t, 42, runs.Runs[0].Conf["rows"], "the run was triggered with rows=42")
	})

	t.Run("pause and unpause from the DAG page", func(t *testing.T) {
		b := b.on(t)
		cliOK(t, lite, "dags", "pause", "gpu")
		b.open(lite.URL, "#/dags", `tr[data-dag="gpu"]`)
		b.waitFor("the list shows gpu paused", `tr[data-dag="gpu"] [data-paused="true"]`)
		b.waitFor("and slow active", `tr[data-dag="slow"] [data-paused="false"]`)
		b.open(lite.URL, "#/dags/gpu", `#dag-paused [data-paused="true"]`)
		b.waitFor("pause is disabled while paused", "#pause-dag[disabled]")
		b.shot("dag-paused")
		b.run("unpause", clickSel("#unpause-dag"))
		b.waitFor("the page shows it active", `#dag-paused [data-paused="false"]`)
		b.waitFor("unpause is disabled while active", "#unpause-dag[disabled]")
		var d protocol.DAG
		getJSON(t, lite, "/v1/dags/gpu", &d)
		assert.False(t, d.Paused, "the API says unpaused")
		b.run("pause again", clickSel("#pause-dag"))
		b.waitFor("the page shows it paused", `#dag-paused [data-paused="true"]`)
		getJSON(t, lite, "/v1/dags/gpu", &d)
		assert.True(t, d.Paused, "the API says paused")
		assert.Contains(t, cliOK(t, lite, "dags", "list"), "gpu", "the CLI lists it")
		assert.Regexp(t, `(?m)^gpu\s+1\s+true\s`, cliOK(t, lite, "dags", "list"), "the CLI table shows it paused")
		cliOK(t, lite, "dags", "unpause", "gpu")
	})

	t.Run("a DAG's grid and durations, a run's Gantt chart", func(t *testing.T) {
		consoleHistory(t, b.on(t), lite, marker)
	})

	t.Run("a task instance's outputs on the run page", func(t *testing.T) {
		b := b.on(t)
		run, _ := triggerJSON(t, lite, "emit", false)
		waitRunState(t, lite, run.ID, "success", 30*time.Second)
		b.open(lite.URL, fmt.Sprintf("#/runs/%d", run.ID), `#tis tr[data-outputs="emit"]`)
		out := `#tis tr[data-outputs="emit"] `
		assert.Equal(t, "12", b.text(out+`tr[data-output-key="rows"] pre`))
		assert.Equal(t, "first line\nsecond line", b.text(out+`tr[data-output-key="note"] pre`), "the value whole, its line break kept")
		assert.Contains(t, b.text(out+"thead"), "try 1")
		assert.Zero(t, b.count(`#tis tr[data-outputs="use"]`), "use wrote no outputs")
		b.shot("run-outputs")
	})

	t.Run("clear and mark from the run page", func(t *testing.T) {
		consoleRerun(t, b.on(t), lite, marker)
	})

	t.Run("the pools page", func(t *testing.T) {
		consolePools(t, b.on(t), lite)
	})

	t.Run("laptop width: no page scrolls sideways", func(t *testing.T) {
		b := b.on(t)
		b.run("a 1024 px window", chromedp.EmulateViewport(1024, 700))
		defer b.run("back to 1280 px", chromedp.EmulateViewport(1280, 860))
		for _, page := range []struct{ route, sel string }{
			{"#/runs", "#runs tbody tr"}, {"#/runs/1", "#graph svg"}, {"#/cluster", "#replicas tr[data-replica]"},
			{"#/agents", "#agents tr[data-agent]"}, {"#/at-risk", "#risk-queued"}, {"#/dags/history", "#grid"}, {"#/pools", "#pools"},
		} {
			b.open(lite.URL, page.route, page.sel)
			var fits bool
			b.eval(`document.documentElement.scrollWidth <= window.innerWidth`, &fits)
			assert.True(t, fits, "%s is wider than a 1024 px window", page.route)
		}
		b.open(lite.URL, "#/runs/3", "#events")
		b.shot("run-detail-1024px")
	})

	t.Run("a viewer cannot cancel", func(t *testing.T) {
		b := b.on(t)
		run, _ := triggerJSON(t, lite, "gpu", false)
		b.run("sign out", clickSel("#signout"), waitVisible("#token"))
		b.signIn(lite.URL, viewerToken, "viewer")
		b.open(lite.URL, fmt.Sprintf("#/runs/%d", run.ID), "#cancel-run")
		b.waitFor("the cancel button is disabled for the viewer", "#cancel-run[disabled]")
		b.shot("run-detail-viewer")
		viewerCannotRerun(t, b, lite)
		viewerCannotSetPools(t, b, lite)
		var status int
		b.eval(fmt.Sprintf(`(async () => {
			const s = await (await fetch("/v1/session")).json();
			const r = await fetch("/v1/runs/%d/cancel", {method: "POST", headers: {"X-Vigil-CSRF": s.csrf_token}});
			return r.status; })()`, run.ID), &status)
		assert.Equal(t, 403, status, "the API refuses the viewer's cancel, with its session and CSRF token")
		assert.NotEqual(t, "cancelled", runDetail(t, lite, run.ID).State, "the run was not cancelled")
		b.open(lite.URL, "#/dags", `tr[data-dag="gpu"]`)
		b.shot("dags")
		b.open(lite.URL, "#/dags/slow", "#trigger-run")
		b.waitFor("pause is disabled for the viewer", "#pause-dag[disabled]")
		b.waitFor("unpause is disabled for the viewer", "#unpause-dag[disabled]")
		b.shot("dag")
		b.open(lite.URL, "#/cluster", `#replicas tr[data-replica]`)
		b.shot("cluster")
	})
}

package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// historyDAG is the DAG whose grid the browser test reads: its check task
// fails until the file marker exists, and report then ends
// upstream_failed.
func historyDAG(marker string) string {
	return "dag_id: history\ntasks:\n  - id: extract\n    command: ['true']\n" +
		"  - id: check\n    depends_on: [extract]\n    command: [sh, -c, 'test -e " + marker + " || { echo not fixed >&2; exit 1; }']\n" +
		"  - id: report\n    depends_on: [check]\n    command: ['true']\n"
}

// historyRuns triggers n runs of history at once and waits until each
// ends in state.
func historyRuns(t *testing.T, lite *liteProc, n int, state string) []int64 {
	t.Helper()
	var ids []int64
	for range n {
		run, _ := triggerJSON(t, lite, "history", false)
		ids = append(ids, run.ID)
	}
	for _, id := range ids {
		waitRunState(t, lite, id, state, 30*time.Second)
	}
	return ids
}

// consoleHistory: three runs of history, the first failing at check, are
// shown on the DAG's page as a grid of 3 tasks × 3 runs whose cells carry
// each TI's state and link to its try, and as 3 duration bars; the failed
// run's page draws one Gantt bar per try.
func consoleHistory(t *testing.T, b *browser, lite *liteProc, marker string) {
	failed := historyRuns(t, lite, 1, "failed")[0]
	require.NoError(t, os.WriteFile(marker, nil, 0o644))
	ok := historyRuns(t, lite, 2, "success")

	b.open(lite.URL, "#/dags/history", `#grid`)
	b.waitFor("the last run's column", fmt.Sprintf(`#grid thead th[data-run-id="%d"]`, ok[1]))
	assert.Equal(t, 3, b.count(`#grid thead th[data-run-id]`), "one column per run")
	assert.Equal(t, 3, b.count(`#grid tbody tr[data-task]`), "one row per task")
	assert.Equal(t, 9, b.count(`#grid tbody a[data-state]`), "one cell per TI")
	assert.Equal(t, 7, b.count(`#grid tbody a[data-state="success"]`))
	cell := func(run int64, task string) string {
		return fmt.Sprintf(`#grid tbody a[data-run-id="%d"][data-task=%q]`, run, task)
	}
	b.waitFor("check failed in the first run", cell(failed, "check")+`[data-state="failed"]`)
	b.waitFor("report upstream_failed in it", cell(failed, "report")+`[data-state="upstream_failed"]`)
	assert.Equal(t, "✗", b.text(cell(failed, "check")), "the state has its symbol, not colour alone")
	var href string
	b.run("the failed cell's link", attr(cell(failed, "check"), "href", &href))
	assert.Equal(t, fmt.Sprintf("#/runs/%d/logs/check?try=1", failed), href, "a cell opens its try")
	var order []int64
	b.eval(`[...document.querySelectorAll("#grid thead th[data-run-id]")].map((th) => Number(th.dataset.runId))`, &order)
	assert.Equal(t, []int64{failed, ok[0], ok[1]}, order, "oldest run on the left")

	assert.Equal(t, 3, b.count(`#durations g.dur[data-run-id]`), "one duration bar per run")
	b.waitFor("the failed run's bar", fmt.Sprintf(`#durations g.dur[data-run-id="%d"][data-run-state="failed"]`, failed))
	assert.Equal(t, 2, b.count(`#durations g.dur[data-run-state="success"]`))
	var secs string
	b.run("a bar's duration", attr(fmt.Sprintf(`#durations g.dur[data-run-id="%d"]`, ok[0]), "data-seconds", &secs))
	assert.NotEmpty(t, secs, "a finished run has a duration")
	b.shot("dag-history")

	b.run("show 10 runs", setValue("#grid-limit", "10"), chromedp.Evaluate(
		`document.getElementById("grid-limit").dispatchEvent(new Event("change"))`, nil))
	b.waitFor("the grid of the last 10", `#grid[data-limit="10"]`)
	var hash string
	b.eval(`location.hash`, &hash)
	assert.Equal(t, "#/dags/history?runs=10", hash)
	b.waitFor("the grid again", fmt.Sprintf(`#grid thead th[data-run-id="%d"]`, ok[1]))

	b.run("open the failed check's logs", clickSel(cell(failed, "check")))
	b.waitFor("its logs", `#lines`)
	b.open(lite.URL, fmt.Sprintf("#/runs/%d", failed), `#gantt svg`)
	b.waitFor("check's try failed", `#gantt g.gantt-bar[data-task="check"][data-try="1"][data-outcome="failed"]`)
	b.waitFor("extract's try succeeded", `#gantt g.gantt-bar[data-task="extract"][data-try="1"][data-outcome="success"]`)
	assert.Equal(t, 2, b.count(`#gantt g.gantt-bar`), "one bar per try: report never ran")
	b.shot("run-gantt-failed")
}

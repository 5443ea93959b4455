package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// consoleRerun clears one failed run of history and marks another from
// the run page, through their confirmation panels, against the real API:
// the clear panel lists what a dry run would clear before anything is,
// Cancel changes nothing, and each confirmed action lets the run end
// success.
func consoleRerun(t *testing.T, b *browser, lite *liteProc, marker string) {
	require.NoError(t, os.RemoveAll(marker)) // the grid subtest made it
	runs := historyRuns(t, lite, 2, "failed")
	require.NoError(t, os.WriteFile(marker, nil, 0o644))
	cleared, marked := runs[0], runs[1]

	b.open(lite.URL, fmt.Sprintf("#/runs/%d", cleared), "#clear-run:not([disabled])")
	b.run("open the clear panel", clickSel("#clear-run"))
	b.waitFor("the dry run lists check", `#clear-preview tr[data-clear-task="check"]`)
	b.waitFor("and report", `#clear-preview tr[data-clear-task="report"]`)
	assert.Equal(t, 2, b.count(`#clear-preview tr[data-clear-task]`), "the default selection: the failed and upstream_failed TIs")
	assert.Contains(t, b.text("#clear-confirm"), "Clear 2 task instances")
	b.run("cancel", clickSel("#clear-cancel"))
	b.waitFor("the panel closes", `#confirm-panel:empty`)
	assert.Equal(t, "failed", runDetail(t, lite, cleared).State, "Cancel cleared nothing")

	b.run("open the clear panel again", clickSel("#clear-run"))
	b.waitFor("the dry run", `#clear-preview tr[data-clear-task="check"]`)
	b.run("only extract", clickSel(`#clear-tasks input[value="extract"]`))
	b.waitFor("extract alone", `#clear-preview tbody:not(:has(tr[data-clear-task="check"])) tr[data-clear-task="extract"]`)
	assert.Equal(t, 1, b.count(`#clear-preview tr[data-clear-task]`), "the ticked task only")
	b.run("with its downstream tasks", clickSel("#clear-downstream"), setValue("#clear-reason", "the input file was fixed"))
	b.waitFor("check and report join, by downstream", `#clear-preview tr[data-clear-task="report"]`)
	assert.Equal(t, 3, b.count(`#clear-preview tr[data-clear-task]`), "extract and its downstream tasks")
	assert.Contains(t, b.text("#clear-confirm"), "Clear 3 task instances")
	b.shot("run-clear-confirm")
	b.run("confirm", clickSel("#clear-confirm"))
	b.waitFor("the page says what was cleared", `#confirm-panel [data-cleared="3"]`)
	b.waitFor("the run ends success", `#run-head [data-run-state="success"]`)
	d := runDetail(t, lite, cleared)
	assert.Equal(t, 2, taskInstance(t, d, "check").TryNumber, "check ran again as try 2")
	b.waitFor("the Gantt chart shows check's second try", `#gantt g.gantt-bar[data-task="check"][data-try="2"][data-outcome="success"]`)
	assert.Equal(t, 5, b.count(`#gantt g.gantt-bar`), "extract and check, tries 1 and 2; report, try 1")
	ev := findEvent(runEvents(t, lite, cleared), func(e protocol.Event) bool { return e.Kind == "ti_cleared" && e.TaskID == "extract" })
	require.NotNil(t, ev, "a ti_cleared event")
	assert.Contains(t, ev.Message, "operator", "the event names who cleared")
	assert.Contains(t, ev.Message, "the input file was fixed", "and why")

	b.open(lite.URL, fmt.Sprintf("#/runs/%d", marked), `#tis button[data-mark="success"][data-task="check"]:not([disabled])`)
	b.waitFor("mark failed is disabled on a failed TI", `#tis button[data-mark="failed"][data-task="check"][disabled]`)
	b.run("mark check success", clickSel(`#tis button[data-mark="success"][data-task="check"]`))
	b.waitFor("the mark panel", `#mark-confirm[data-mark-to="success"]`)
	assert.Contains(t, b.text("#mark-panel h2"), fmt.Sprintf("Mark check of run #%d success", marked))
	b.shot("run-mark-confirm")
	b.run("confirm", clickSel("#mark-confirm"))
	b.waitFor("the page says what was marked", `#confirm-panel [data-marked="1"]`)
	b.waitFor("report runs and the run ends success", `#run-head [data-run-state="success"]`)
	d = runDetail(t, lite, marked)
	check := taskInstance(t, d, "check")
	assert.Equal(t, "success", check.State)
	assert.Equal(t, "marked", check.Reason)
	assert.Equal(t, "success", taskInstance(t, d, "report").State, "its dependent ran")
}

// viewerCannotRerun: the viewer sees clear and mark disabled, and the API
// refuses the viewer's clear even with the session's CSRF token.
func viewerCannotRerun(t *testing.T, b *browser, lite *liteProc) {
	run, _ := triggerJSON(t, lite, "breaks", false)
	id := run.ID
	waitRunState(t, lite, id, "failed", 30*time.Second)
	b.open(lite.URL, fmt.Sprintf("#/runs/%d", id), "#clear-run")
	b.waitFor("clear is disabled for the viewer", "#clear-run[disabled]")
	b.waitFor("mark buttons", `#tis button[data-mark]`)
	assert.Equal(t, b.count(`#tis button[data-mark]`), b.count(`#tis button[data-mark][disabled]`), "every mark button is disabled")
	var status int
	b.eval(fmt.Sprintf(`(async () => {
		const s = await (await fetch("/v1/session")).json();
		const r = await fetch("/v1/runs/%d/clear", {method: "POST", headers: {"X-Vigil-CSRF": s.csrf_token, "Content-Type": "application/json"}, body: "{}"});
		return r.status; })()`, id), &status)
	assert.Equal(t, 403, status, "the API refuses the viewer's clear")
	assert.Equal(t, "failed", runDetail(t, lite, id).State, "nothing was cleared")
}

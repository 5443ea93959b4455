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
	"github.com/vigil-sched/vigil/state"
)

// TestLoudTaskLogIsComplete is issue 23's first trial: on Lite with one
// agent, a task prints 300,000 lines as fast as it can, then "done". The
// run succeeds and `vigil logs` shows all 300,001 lines, each once, in
// order, ending "done"; the TI's log is not marked incomplete. (Before
// the agent held a loud task back, about 11,500 were stored.)
func TestLoudTaskLogIsComplete(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "loud", "dag_id: loud\ntasks:\n  - id: print\n    command: [sh, -c, 'seq 1 300000; echo done']\n")
	// A 5 s heartbeat interval, so a 5 s request timeout: the harness's
	// 1 s one can make a log batch on a loaded host count as an outage,
	// which may drop lines by design (TestLogsInTheConsole covers that).
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 1, Extra: []string{"--heartbeat-interval", "5s"}})
	run, code := triggerJSON(t, lite, "loud", true)
	require.Equal(t, 0, code)
	require.Equal(t, "success", run.State)

	out, code := cli(t, lite, "logs", strconv.FormatInt(run.ID, 10), "print")
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 300001, "every line stored once")
	for i, l := range lines[:300000] {
		if want := " [stdout] " + strconv.Itoa(i+1); !strings.HasSuffix(l, want) {
			t.Fatalf("line %d is %q, want it to end %q: every line in order", i+1, l, want)
		}
	}
	assert.True(t, strings.HasSuffix(lines[300000], " [stdout] done"), "the last line: %q", lines[300000])
	assert.Zero(t, taskInstance(t, runDetail(t, lite, run.ID), "print").LogDropped, "the log is complete")
}

// readAllLogs reads a TI's whole log through the API, page by page with
// the (try, seq) cursor, as `vigil logs` does.
func readAllLogs(t *testing.T, lite *liteProc, runID int64, task string) (lines []protocol.StoredLogLine, logDropped int64) {
	t.Helper()
	var afterTry int
	var after int64
	for {
		var page protocol.LogList
		getJSON(t, lite, fmt.Sprintf("/v1/runs/%d/tasks/%s/logs?after_try=%d&after=%d", runID, task, afterTry, after), &page)
		lines = append(lines, page.Lines...)
		logDropped = page.LogDropped
		if len(page.Lines) == 0 {
			return lines, logDropped
		}
		last := page.Lines[len(page.Lines)-1]
		afterTry, after = last.TryNumber, last.Seq
	}
}

// TestLogsInTheConsole runs a real agent with a deliberately small log
// buffer (100 lines) against Lite, and a fake agent whose lines reach the
// server out of order:
//   - a task prints 50 lines, then 5,000 while the control plane is down:
//     the buffer must drop, and its gap marker's count plus the lines
//     stored equals the 5,050 printed; the TI says its log is incomplete,
//     the metric counts the loss, and the console shows the marker's
//     count and the incomplete log;
//   - the console's log page, following a log whose row ids are not in
//     seq order, shows every line once, in seq order, across its polls.
func TestLogsInTheConsole(t *testing.T) {
	t.Parallel()
	dags, tmp := t.TempDir(), t.TempDir()
	gate, finished := filepath.Join(tmp, "gate"), filepath.Join(tmp, "finished")
	writeDAG(t, dags, "lossy", fmt.Sprintf("dag_id: lossy\ntasks:\n  - id: print\n    command: [sh, -c, "+
		"'seq 1 50; while [ ! -e %s ]; do sleep 0.05; done; seq 51 5050; touch %s']\n", gate, finished))
	writeDAG(t, dags, "replayed", "dag_id: replayed\ntasks:\n  - id: talk\n    tags: [fake]\n    command: [\"true\"]\n")
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 0})
	agent := startAgent(t, []string{lite.URL}, agentToken, "small-buffer", "--log-buffer-size", "100")
	agentID(t, agent, 30*time.Second)
	b := startBrowser(t)
	b.signIn(lite.URL, operatorToken, "operator")

	t.Run("a bound forces a drop: the marker counts it", func(t *testing.T) {
		b := b.on(t)
		run, code := triggerJSON(t, lite, "lossy", false)
		require.Equal(t, 0, code)
		waitFor(t, 30*time.Second, func() bool {
			var l protocol.LogList
			return tryGetJSON(lite, fmt.Sprintf("/v1/runs/%d/tasks/print/logs", run.ID), &l) == nil && len(l.Lines) >= 50
		}, "the first 50 lines stored")
		lite.Stop()
		require.NoError(t, os.WriteFile(gate, nil, 0o644))
		waitFor(t, 60*time.Second, func() bool { _, err := os.Stat(finished); return err == nil },
			"the task printed its 5,000 lines during the outage")
		lite.Restart()
		waitRunState(t, lite, run.ID, "success", 60*time.Second)

		var lines []protocol.StoredLogLine
		var logDropped int64
		waitFor(t, 30*time.Second, func() bool {
			lines, logDropped = readAllLogs(t, lite, run.ID, "print")
			return len(lines) > 0 && lines[len(lines)-1].Line == "5050"
		}, "the replayed lines stored")
		var stored, dropped int64
		markers := 0
		for i, l := range lines {
			if i > 0 {
				require.Greater(t, l.Seq, lines[i-1].Seq, "each line once, in seq order")
			}
			switch {
			case l.Stream == protocol.StreamSystem && l.Dropped > 0:
				markers++
				dropped += l.Dropped
			case l.Stream == protocol.StreamStdout:
				stored++
			}
		}
		t.Logf("stored %d, dropped %d in %d marker(s)", stored, dropped, markers)
		require.Equal(t, 1, markers, "one gap marker counts the loss")
		assert.Equal(t, int64(5050), stored+dropped, "lines stored + the marker's dropped = lines printed")
		assert.Greater(t, dropped, int64(4000), "a 100-line buffer dropped most of the outage's 5,000")
		assert.Equal(t, dropped, logDropped, "the log read says the log is incomplete")
		assert.Equal(t, dropped, taskInstance(t, runDetail(t, lite, run.ID), "print").LogDropped, "so does the TI")
		assert.Equal(t, float64(dropped), sampleValues(metricsText(t, lite), "vigil_log_lines_dropped_total", "")[""],
			"the metric counts the loss")

		out, code := cli(t, lite, "logs", strconv.FormatInt(run.ID, 10), "print")
		require.Equal(t, 0, code)
		assert.Contains(t, out, fmt.Sprintf(" [%d lines of this try lost here]\n", dropped), "vigil logs shows the marker's count")
		assert.True(t, strings.HasSuffix(out, fmt.Sprintf("log incomplete: %d line(s) were lost (see the gap markers above)\n", dropped)),
			"and ends saying the log is incomplete: %q", out[max(0, len(out)-200):])

		b.open(lite.URL, fmt.Sprintf("#/runs/%d/logs/print", run.ID), `#lines .gap [data-dropped]`)
		var n string
		b.run("the marker's count", attr(`#lines .gap [data-dropped]`, "data-dropped", &n))
		assert.Equal(t, strconv.FormatInt(dropped, 10), n, "the console shows the marker's count")
		assert.Contains(t, b.text(`#lines .gap`), fmt.Sprintf("%d lines of this try were lost here", dropped))
		b.waitFor("the page says the log is incomplete", `#follow [data-log-incomplete]`)
		b.run("show the marker", chromedp.ScrollIntoView(`#lines .gap`, chromedp.ByQuery))
		b.shot("logs-lines-lost")
		b.open(lite.URL, fmt.Sprintf("#/runs/%d", run.ID), fmt.Sprintf(`#tis [data-log-incomplete="%d"]`, dropped))
	})

	t.Run("no line twice across polls", func(t *testing.T) {
		b := b.on(t)
		var reg protocol.RegisterResponse
		agentPost(t, lite, "/v1/agents/register", protocol.RegisterRequest{Name: "fake-agent", Tags: []string{"fake"}, Capacity: 1}, &reg)
		run, code := triggerJSON(t, lite, "replayed", false)
		require.Equal(t, 0, code)
		var claim protocol.ClaimResponse
		waitFor(t, 20*time.Second, func() bool {
			agentPost(t, lite, fmt.Sprintf("/v1/agents/%d/claim", reg.AgentID),
				protocol.ClaimRequest{Slots: 1, Wait: protocol.Duration(2 * time.Second)}, &claim)
			return len(claim.Tasks) > 0
		}, "the fake agent's claim")
		task := claim.Tasks[0]
		agentPost(t, lite, fmt.Sprintf("/v1/agents/%d/heartbeat", reg.AgentID),
			protocol.HeartbeatRequest{Entries: []protocol.HeartbeatEntry{{Attempt: task.Attempt, Started: true}}}, nil)
		send := func(seqs ...int64) {
			var lines []protocol.LogLine
			for _, s := range seqs {
				lines = append(lines, protocol.LogLine{Attempt: task.Attempt, Seq: s, Stream: protocol.StreamStdout,
					Time: time.Now(), Line: fmt.Sprintf("line %d", s)})
			}
			agentPost(t, lite, fmt.Sprintf("/v1/agents/%d/logs", reg.AgentID), protocol.LogsRequest{Lines: lines}, nil)
		}
		send(3)    // the lowest row id
		send(1, 2) // higher ids, lower seqs: a replay
		b.open(lite.URL, fmt.Sprintf("#/runs/%d/logs/talk?try=1", run.ID), `#lines .logline[data-seq="3"]`)
		send(4, 5)
		b.waitFor("the later lines", `#lines .logline[data-seq="5"]`)
		exit := 0
		agentPost(t, lite, fmt.Sprintf("/v1/agents/%d/complete", reg.AgentID),
			protocol.CompleteRequest{Attempt: task.Attempt, Outcome: state.OutcomeSuccess, ExitCode: &exit}, nil)
		waitFor(t, 20*time.Second, func() bool {
			return strings.Contains(b.text("#follow"), "the task has ended")
		}, "the page stops following")
		var seqs []string
		b.eval(`[...document.querySelectorAll("#lines .logline")].map((e) => e.dataset.seq)`, &seqs)
		assert.Equal(t, []string{"1", "2", "3", "4", "5"}, seqs, "every line once, in seq order")
	})
}

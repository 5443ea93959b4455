package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// Short recovery settings: heartbeat 1 s, agent-lost after 3 s, sweeps
// every 250 ms, ticks every 200 ms.
const shortThreshold = 3 * time.Second

// killGrace is the --kill-grace of the agents these tests SIGKILL: their
// tasks must be gone within it (plus 1 s) of the kill.
const killGrace = 2 * time.Second

var shortRecovery = []string{"--heartbeat-interval", "1s", "--agent-lost-threshold", "3s",
	"--sweep-interval", "250ms", "--tick-interval", "200ms"}

// TestKilledAgentIsReapedAndRetriedElsewhere SIGKILLs the agent running a
// task: its task dies with it (the supervisor kills its group within
// kill-grace), the agent-lost reaper fails the try (agent_lost) within
// threshold + sweep of the kill, the retry runs on the other agent and
// the run succeeds; /metrics counts exactly that one decision.
func TestKilledAgentIsReapedAndRetriedElsewhere(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	pidDir := t.TempDir()
	writeDAG(t, dags, "beats", fmt.Sprintf(`
dag_id: beats
tasks:
  - id: beat
    retries: 1
    env:
      PIDDIR: %q
    command:
      - sh
      - -c
      - |
        echo $$ > "$PIDDIR/try-$VIGIL_TRY_NUMBER.pid"
        i=0
        while [ "$i" -lt 20 ]; do
          i=$((i + 1))
          echo "beat $i (try $VIGIL_TRY_NUMBER)"
          sleep 0.5
        done
`, pidDir))
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 0, Extra: shortRecovery})
	agents := map[int64]*proc{}
	for _, name := range []string{"agent-a", "agent-b"} {
		a := startAgent(t, []string{lite.URL}, agentToken, name, "--capacity", "1", "--kill-grace", killGrace.String())
		agents[agentID(t, a, 30*time.Second)] = a
	}
	require.Len(t, agents, 2, "two agents with distinct ids")

	run, code := triggerJSON(t, lite, "beats", false)
	require.Equal(t, 0, code)
	ti := waitTI(t, lite, run.ID, "beat", 30*time.Second, "running with started_at", func(ti protocol.TaskInstance) bool {
		return ti.State == "running" && ti.StartedAt != nil && ti.AgentID != nil
	})
	require.Equal(t, 1, ti.TryNumber)
	firstID := *ti.AgentID
	victim := agents[firstID]
	require.NotNil(t, victim, "try 1 runs on one of our agents (agent_id %d)", firstID)
	var otherID int64
	for id := range agents {
		if id != firstID {
			otherID = id
		}
	}
	claimed := findEvent(runEvents(t, lite, run.ID), func(e protocol.Event) bool {
		return e.Kind == "ti_claimed" && e.TryNumber != nil && *e.TryNumber == 1
	})
	require.NotNil(t, claimed, "a ti_claimed event for try 1")
	require.NotNil(t, claimed.AgentID)
	assert.Equal(t, firstID, *claimed.AgentID, "the claim event names the agent the TI shows")
	try1Pid := readPid(t, filepath.Join(pidDir, "try-1.pid"), 10*time.Second)
	t.Logf("try 1 runs on %s (agent %d) as pid %d; the other agent is %d", victim.name, firstID, try1Pid, otherID)

	killedAt := time.Now()
	victim.kill(t)
	waitFor(t, killGrace+time.Second-time.Since(killedAt), func() bool { return !pidAlive(try1Pid) },
		fmt.Sprintf("try 1 (pid %d) gone within kill-grace + 1 s of its agent's SIGKILL", try1Pid))
	t.Logf("SIGKILLed %s; its task (pid %d) was gone %s later", victim.name, try1Pid, time.Since(killedAt).Round(time.Millisecond))
	assert.Empty(t, leftAfter(victim, killedAt.Add(killGrace+time.Second)),
		"no process of the killed agent (its task's supervisor included) is left within kill-grace + 1 s")

	var lost *protocol.Event
	waitFor(t, 15*time.Second, func() bool {
		events, err := tryRunEvents(lite, run.ID)
		if err != nil {
			return false
		}
		lost = findEvent(events, func(e protocol.Event) bool { return e.Kind == "agent_lost" })
		return lost != nil
	}, "an agent_lost event")
	observed := time.Since(killedAt)
	reapedAfter := lost.Time.Sub(killedAt)
	t.Logf("reap latency after kill -9: %s by the event's timestamp, observed by polling after %s (threshold %s, sweep 250ms)",
		reapedAfter.Round(time.Millisecond), observed.Round(time.Millisecond), shortThreshold)
	assert.LessOrEqual(t, reapedAfter, shortThreshold+2*time.Second, "reaped within threshold + 2 s of the kill")
	// The last heartbeat came at most one interval (1 s, re-armed after
	// each request) before the kill: no reap before it was a threshold old.
	assert.GreaterOrEqual(t, reapedAfter, shortThreshold-1500*time.Millisecond, "not reaped before the last heartbeat was a threshold old")
	if assert.NotNil(t, lost.TryNumber) {
		assert.Equal(t, 1, *lost.TryNumber)
	}
	if assert.NotNil(t, lost.AgentID) {
		assert.Equal(t, firstID, *lost.AgentID)
	}
	assert.Contains(t, lost.Message, "try 1 failed, retry in")

	d := waitRunState(t, lite, run.ID, "success", 40*time.Second)
	ti = taskInstance(t, d, "beat")
	assert.Equal(t, "success", ti.State)
	assert.Equal(t, 2, ti.TryNumber, "succeeded on the retry")
	if assert.NotNil(t, ti.AgentID) {
		assert.Equal(t, otherID, *ti.AgentID, "the retry ran on the other agent")
	}
	events := runEvents(t, lite, run.ID)
	retry := findEvent(events, func(e protocol.Event) bool {
		return e.Kind == "ti_claimed" && e.TryNumber != nil && *e.TryNumber == 2
	})
	if assert.NotNil(t, retry, "a ti_claimed event for try 2") && assert.NotNil(t, retry.AgentID) {
		assert.Equal(t, otherID, *retry.AgentID)
	}
	var lostEvents int
	for _, e := range events {
		if e.Kind == "agent_lost" {
			lostEvents++
		}
	}
	assert.Equal(t, 1, lostEvents, "exactly one agent_lost event")
	var try2 []string
	for _, l := range taskLogs(t, lite, run.ID, "beat").Lines {
		if l.TryNumber == 2 {
			try2 = append(try2, l.Line)
		}
	}
	if assert.Len(t, try2, 20, "try 2 printed every beat") {
		assert.Equal(t, "beat 1 (try 2)", try2[0])
		assert.Equal(t, "beat 20 (try 2)", try2[19])
	}

	metrics := metricsText(t, lite)
	assert.Contains(t, metrics, "vigil_scheduler_decisions_total{decision=\"agent_lost\"} 1\n")
	decisions := decisionCounts(metrics)
	t.Logf("decisions: %v", decisions)
	assert.Equal(t, 1.0, decisions["agent_lost"])
	for _, d := range []string{"dispatch_lost", "orphan_reaped"} {
		assert.Zero(t, decisions[d], "decision %s", d)
	}
}

// TestControlPlaneOutageReapsNothing stops Lite for longer than the
// agent-lost threshold while a remote agent runs a task: after the
// restart the post-leadership grace holds the reaper back until the agent
// has reconnected, so nothing is reaped, the task finishes on its first
// try and its log has every line plus one gap marker.
func TestControlPlaneOutageReapsNothing(t *testing.T) {
	t.Parallel()
	const lines = 120 // one every 100 ms: about 12 s
	dags := t.TempDir()
	writeDAG(t, dags, "steady", fmt.Sprintf(`
dag_id: steady
tasks:
  - id: count
    retries: 0
    command:
      - sh
      - -c
      - |
        i=0
        while [ "$i" -lt %d ]; do
          i=$((i + 1))
          echo "line $i"
          sleep 0.1
        done
`, lines))
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 0, Extra: shortRecovery})
	agent := startAgent(t, []string{lite.URL}, agentToken, "steady-agent")
	agentID(t, agent, 30*time.Second)

	run, code := triggerJSON(t, lite, "steady", false)
	require.Equal(t, 0, code)
	waitTI(t, lite, run.ID, "count", 30*time.Second, "running with started_at", func(ti protocol.TaskInstance) bool {
		return ti.State == "running" && ti.StartedAt != nil
	})
	const before = 5 // lines shipped before the outage
	waitFor(t, 10*time.Second, func() bool {
		var l protocol.LogList
		return tryGetJSON(lite, fmt.Sprintf("/v1/runs/%d/tasks/count/logs", run.ID), &l) == nil && len(l.Lines) >= before
	}, fmt.Sprintf("%d log lines shipped", before))

	down := time.Now()
	lite.Stop()
	require.Equal(t, 0, lite.ExitCode(), "Lite exits 0 on SIGTERM")
	time.Sleep(5*time.Second - time.Since(down)) // the 5 s outage, > the 3 s threshold
	// The agent's reconnect back-off is capped at the heartbeat interval
	// (1 s), so it reaches the new leader well within the 3 s grace.
	lite.Restart()
	outage := time.Since(down)
	t.Logf("control plane outage: %s (SIGTERM to the restarted Lite answering /readyz)", outage.Round(time.Millisecond))
	assert.GreaterOrEqual(t, outage, 5*time.Second, "down for longer than the agent-lost threshold")
	graceStart := leadingSince(t, lite)
	reconnected := registeredAfter(t, agent, graceStart, 15*time.Second)
	t.Logf("agent re-registered %s after the new leader started its grace (threshold %s)",
		reconnected.Sub(graceStart).Round(time.Millisecond), shortThreshold)
	require.Less(t, reconnected.Sub(graceStart), shortThreshold,
		"precondition: the agent reconnected within the new leader's grace")

	d := waitRunState(t, lite, run.ID, "success", 40*time.Second)
	ti := taskInstance(t, d, "count")
	assert.Equal(t, "success", ti.State)
	assert.Equal(t, 1, ti.TryNumber, "the first try finished: nothing was reaped")
	events := runEvents(t, lite, run.ID)
	for _, e := range events {
		assert.NotEqual(t, "agent_lost", e.Kind, "no agent_lost event: %+v", e)
		assert.NotEqual(t, "agent_lost_requeued", e.Kind, "no agent_lost_requeued event: %+v", e)
	}
	decisions := decisionCounts(metricsText(t, lite))
	assert.Zero(t, decisions["agent_lost"], "the new Lite decided no agent_lost: %v", decisions)

	var stdout []string
	var markers []protocol.StoredLogLine
	markerAt := -1
	logs := taskLogs(t, lite, run.ID, "count")
	for _, l := range logs.Lines {
		switch {
		case strings.HasPrefix(l.Line, "--- control plane unreachable for"):
			markers = append(markers, l)
			markerAt = len(stdout)
		case l.Stream == protocol.StreamStdout:
			stdout = append(stdout, l.Line)
		default:
			t.Errorf("unexpected %s line %q", l.Stream, l.Line)
		}
	}
	want := make([]string, lines)
	for i := range want {
		want[i] = fmt.Sprintf("line %d", i+1)
	}
	assert.Equal(t, want, stdout, "every printed line, in order")
	require.Len(t, markers, 1, "exactly one gap marker")
	assert.Equal(t, protocol.StreamSystem, markers[0].Stream)
	t.Logf("gap marker after %q: %s", stdout[max(markerAt-1, 0)], markers[0].Line)
	assert.GreaterOrEqual(t, markerAt, before, "the marker follows the lines shipped before the outage")
	assert.Less(t, markerAt, lines, "the marker precedes the lines printed during the outage")
	m := regexp.MustCompile(`^--- control plane unreachable for (\d+)s: replaying \d+ buffered events and (\d+) log lines \(0 dropped\) ---$`).
		FindStringSubmatch(markers[0].Line)
	if assert.NotNil(t, m, "marker text") {
		secs, _ := strconv.Atoi(m[1])
		assert.GreaterOrEqual(t, secs, 4, "the marker's outage covers the 5 s Lite was down")
		assert.LessOrEqual(t, time.Duration(secs)*time.Second, outage+10*time.Second)
		replayed, _ := strconv.Atoi(m[2])
		assert.Positive(t, replayed, "lines printed during the outage were buffered and replayed")
	}
	assert.False(t, agent.exited(), "the agent outlived the outage")
}

// TestReapDryRunListsSeededCandidates seeds a dispatch-lost candidate (a TI
// queued for a tag nobody offers) and an agent-lost one (a TI claimed and
// started by a fake agent whose heartbeat is then aged), and checks that
// `vigil reap --dry-run` lists them with their signals, holds back the
// agent-lost one during the post-leadership grace and writes nothing, and
// that `vigil reap` then fails both with the right reasons and events.
func TestReapDryRunListsSeededCandidates(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "unowned", `
dag_id: unowned
tasks:
  - id: lonely
    tags: [nobody]
    command: ["true"]
`)
	writeDAG(t, dags, "faked", `
dag_id: faked
tasks:
  - id: ghost
    retries: 0
    tags: [fake]
    command: ["true"]
`)
	// Sweeps only at each start of leadership and when forced, so no
	// automatic sweep acts on the seeded rows behind the test's back.
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 0, Extra: []string{"--sweep-interval", "10m"}})
	ctx := context.Background()
	db, err := pgx.Connect(ctx, lite.DatabaseURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })

	// (a) A TI queued for tag nobody.
	unowned, code := triggerJSON(t, lite, "unowned", false)
	require.Equal(t, 0, code)
	lonely := waitTI(t, lite, unowned.ID, "lonely", 15*time.Second, "queued", func(ti protocol.TaskInstance) bool {
		return ti.State == "queued" && ti.QueuedAt != nil
	})

	// (b) A TI claimed and started by a fake agent.
	var reg protocol.RegisterResponse
	agentPost(t, lite, "/v1/agents/register", protocol.RegisterRequest{Name: "fake-agent", Tags: []string{"fake"}, Capacity: 1}, &reg)
	require.NotZero(t, reg.AgentID)
	faked, code := triggerJSON(t, lite, "faked", false)
	require.Equal(t, 0, code)
	var claim protocol.ClaimResponse
	waitFor(t, 20*time.Second, func() bool {
		agentPost(t, lite, fmt.Sprintf("/v1/agents/%d/claim", reg.AgentID),
			protocol.ClaimRequest{Slots: 1, Wait: protocol.Duration(2 * time.Second)}, &claim)
		return len(claim.Tasks) > 0
	}, "the fake agent's claim")
	require.Len(t, claim.Tasks, 1)
	task := claim.Tasks[0]
	require.Equal(t, faked.ID, task.RunID, "the fake agent claimed the faked run's TI, not the nobody one")
	var hb protocol.HeartbeatResponse
	agentPost(t, lite, fmt.Sprintf("/v1/agents/%d/heartbeat", reg.AgentID),
		protocol.HeartbeatRequest{Entries: []protocol.HeartbeatEntry{{Attempt: task.Attempt, Started: true}}}, &hb)
	assert.Empty(t, hb.Stop)
	ghost := taskInstance(t, runDetail(t, lite, faked.ID), "ghost")
	require.Equal(t, "running", ghost.State)
	require.NotNil(t, ghost.StartedAt, "the heartbeat reported the start")
	if assert.NotNil(t, ghost.AgentID) {
		assert.Equal(t, reg.AgentID, *ghost.AgentID)
	}

	// Age both signals by ten minutes.
	age := func(column string, id int64) {
		t.Helper()
		tag, err := db.Exec(ctx, `UPDATE task_instances SET `+column+` = now() - interval '10 minutes' WHERE id = $1`, id)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
		// Keep the agent's oldest_heartbeat_at no later than its TIs'
		// stamps, as claims and heartbeats do.
		_, err = db.Exec(ctx, `UPDATE agents SET oldest_heartbeat_at = now() - interval '10 minutes'
			WHERE id = (SELECT agent_id FROM task_instances WHERE id = $1)`, id)
		require.NoError(t, err)
	}
	age("queued_at", lonely.ID)
	age("last_heartbeat_at", ghost.ID)

	// Lite leads for seconds, far less than the 90 s agent-lost threshold:
	// the agent-lost candidate is held back and the report says why. So is
	// the dispatch-lost one: it judges agents active by their heartbeats,
	// which an outage stops too, and observes the same grace (278215b).
	rep := reapReport(t, lite, true)
	t.Logf("dry run in grace: %+v, candidates %+v", rep.Grace, rep.Candidates)
	assert.True(t, rep.DryRun)
	assert.Contains(t, rep.GraceText(), "agent-lost reaper in post-leadership grace")
	assert.Contains(t, rep.GraceText(), "dispatch-lost reaper in post-leadership grace")
	reapers := map[string]bool{}
	for _, n := range rep.Grace {
		reapers[n.Reaper] = true
	}
	assert.True(t, reapers["agent_lost"] && reapers["dispatch_lost"], "grace is a list of {reaper, message}: %+v", rep.Grace)
	assert.Empty(t, tiCandidates(rep), "no task instance is a candidate during the grace")

	// Restart with a 2 s agent-lost threshold, so the new leader's grace
	// is 2 s. It sweeps as it starts leading (once on its first tick and
	// once more when its notification listener connects, which wakes every
	// subscriber), then not for 10 min unless forced: those sweeps fall
	// inside the grace and must leave both TIs alone.
	lite.Stop()
	lite.RestartWith("--agent-lost-threshold", "2s", "--heartbeat-interval", "1s")
	waitFor(t, 10*time.Second, func() bool {
		return sweepCount(metricsText(t, lite), "dispatch_lost") >= 1
	}, "the new leader's first sweep")
	led := time.Now() // the new leader's grace started before this
	out, code := cli(t, lite, "thresholds", "get", "-o", "json")
	require.Equal(t, 0, code, "thresholds get: %s", out)
	var th protocol.Thresholds
	require.NoError(t, json.Unmarshal([]byte(out), &th))
	require.Equal(t, protocol.Thresholds{AgentLost: protocol.Duration(2 * time.Second),
		DispatchLost: protocol.Duration(3 * time.Minute), Orphan: protocol.Duration(5 * time.Minute)}, th)
	time.Sleep(2500*time.Millisecond - time.Since(led))

	unchanged := func() {
		t.Helper()
		assert.Equal(t, "queued", taskInstance(t, runDetail(t, lite, unowned.ID), "lonely").State)
		assert.Equal(t, "running", taskInstance(t, runDetail(t, lite, faked.ID), "ghost").State)
		for _, id := range []int64{unowned.ID, faked.ID} {
			for _, e := range runEvents(t, lite, id) {
				assert.NotContains(t, []string{"agent_lost", "dispatch_lost"}, e.Kind, "run %d: nothing reaped yet", id)
			}
		}
	}
	unchanged() // the first sweep, in grace, did nothing
	rep = reapReport(t, lite, true)
	t.Logf("dry run after the grace: %+v", rep.Candidates)
	assert.True(t, rep.DryRun)
	assert.Empty(t, rep.Grace, "the 2 s grace is over")
	tis := tiCandidates(rep)
	require.Len(t, tis, 2, "both task instances are candidates: %+v", rep.Candidates)
	for _, c := range rep.Candidates {
		if c.TIID == nil { // an agent-level candidate: only the silent fake agent may be one
			assert.Equal(t, "agent_inactive", c.Decision, "%+v", c)
			if assert.NotNil(t, c.AgentID) {
				assert.Equal(t, reg.AgentID, *c.AgentID)
			}
		}
	}
	lost, ok := tis["agent_lost"]
	if assert.True(t, ok, "an agent_lost candidate: %+v", rep.Candidates) {
		assert.Equal(t, "agent_lost", lost.Reaper)
		assert.Equal(t, faked.ID, lost.RunID)
		assert.Equal(t, ghost.ID, *lost.TIID)
		if assert.NotNil(t, lost.AgentID) {
			assert.Equal(t, reg.AgentID, *lost.AgentID)
		}
		assert.Equal(t, "last_heartbeat_at", lost.Signal)
		assert.GreaterOrEqual(t, lost.Age.D(), 10*time.Minute)
		assert.Equal(t, 1, lost.TryNumber)
		assert.False(t, lost.Applied)
	}
	disp, ok := tis["dispatch_lost"]
	if assert.True(t, ok, "a dispatch_lost candidate: %+v", rep.Candidates) {
		assert.Equal(t, "dispatch_lost", disp.Reaper)
		assert.Equal(t, unowned.ID, disp.RunID)
		assert.Equal(t, lonely.ID, *disp.TIID)
		assert.Equal(t, "queued_at", disp.Signal)
		assert.GreaterOrEqual(t, disp.Age.D(), 10*time.Minute)
		assert.Contains(t, disp.Message, "nobody")
		assert.False(t, disp.Applied)
	}
	unchanged() // a dry run writes nothing

	// A forced sweep acts on both.
	out, code = cli(t, lite, "reap")
	require.Equal(t, 0, code, "vigil reap:\n%s", out)
	t.Logf("vigil reap:\n%s", out)
	assert.Regexp(t, `(?m)^REAPER\s+DECISION\s+RUN\s+TASK\s+TRY\s+AGENT\s+SIGNAL\s+AGE\s+APPLIED\s+MESSAGE$`, out)
	assert.Regexp(t, fmt.Sprintf(`(?m)^agent_lost\s+agent_lost\s+%d\s+ghost\s+1\s+%d\s+last_heartbeat_at\s+\S+\s+true\s`, faked.ID, reg.AgentID), out)
	assert.Regexp(t, fmt.Sprintf(`(?m)^dispatch_lost\s+dispatch_lost\s+%d\s+lonely\s+\S+\s+-\s+queued_at\s+\S+\s+true\s.*nobody`, unowned.ID), out)

	for _, r := range []struct {
		run          int64
		task, reason string
	}{{faked.ID, "ghost", "agent_lost"}, {unowned.ID, "lonely", "dispatch_lost"}} {
		ti := taskInstance(t, runDetail(t, lite, r.run), r.task)
		assert.Equal(t, "failed", ti.State, "task %s", r.task)
		assert.Equal(t, r.reason, ti.Reason, "task %s", r.task)
		assert.NotNil(t, ti.EndDate, "task %s", r.task)
		out, code := cli(t, lite, "runs", "events", strconv.FormatInt(r.run, 10))
		require.Equal(t, 0, code)
		assert.Regexp(t, fmt.Sprintf(`(?m)^\S+\s+%s\s+%s\s`, r.reason, r.task), out, "runs events %d:\n%s", r.run, out)
		waitRunState(t, lite, r.run, "failed", 10*time.Second)
	}
	decisions := decisionCounts(metricsText(t, lite))
	assert.Equal(t, 1.0, decisions["agent_lost"], "%v", decisions)
	assert.Equal(t, 1.0, decisions["dispatch_lost"], "%v", decisions)
}

// TestThresholdsCLI drives `vigil thresholds get|set|reset` against a
// Lite whose heartbeat interval is 15 s.
func TestThresholdsCLI(t *testing.T) {
	t.Parallel()
	lite := startLite(t, liteOpts{Agents: 0, Extra: []string{"--heartbeat-interval", "15s"}})
	env := []string{"VIGIL_SERVER=" + lite.URL, "VIGIL_TOKEN=" + operatorToken}
	getJSONThresholds := func() map[string]string {
		t.Helper()
		r := runVigil(t, env, "thresholds", "get", "-o", "json")
		require.Equal(t, 0, r.Code)
		var th map[string]string
		require.NoError(t, json.Unmarshal([]byte(r.Stdout), &th), "thresholds get -o json: %q", r.Stdout)
		return th
	}
	defaults := map[string]string{"agent_lost": "1m30s", "dispatch_lost": "3m0s", "orphan": "5m0s"}
	require.Equal(t, defaults, getJSONThresholds())

	// Rejected by the server: exit 2 as if rejected locally, naming the
	// flag typed.
	r := runVigil(t, env, "thresholds", "set", "--agent-lost", "10s")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "--agent-lost: 10s must be at least 2 × the heartbeat interval")
	assert.NotContains(t, r.Stderr, "agent-lost-threshold")
	assert.Empty(t, r.Stdout)
	assert.Equal(t, defaults, getJSONThresholds(), "a rejected set changes nothing")

	r = runVigil(t, env, "thresholds", "set", "--agent-lost", "45s", "--orphan", "2m")
	require.Equal(t, 0, r.Code)
	assert.Regexp(t, `(?m)^agent-lost\s+45s$`, r.Stdout)
	assert.Regexp(t, `(?m)^orphan\s+2m0s$`, r.Stdout)
	assert.Equal(t, map[string]string{"agent_lost": "45s", "dispatch_lost": "3m0s", "orphan": "2m0s"}, getJSONThresholds())

	r = runVigil(t, env, "thresholds", "reset", "-o", "json")
	require.Equal(t, 0, r.Code)
	var th map[string]string
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &th))
	assert.Equal(t, defaults, th)
	assert.Equal(t, defaults, getJSONThresholds())

	r = runVigil(t, env, "thresholds", "set", "--agent-lost", "nope")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "--agent-lost")
	assert.Equal(t, defaults, getJSONThresholds())
}

// leadingSince is the grace_start the current Lite logged when its
// scheduler started leading.
func leadingSince(t *testing.T, lite *liteProc) time.Time {
	t.Helper()
	var at time.Time
	waitFor(t, 10*time.Second, func() bool {
		for _, rec := range jsonLogLines(lite.LogPath()) {
			if rec["msg"] == "leading: scheduler and reapers started" {
				var err error
				at, err = time.Parse(time.RFC3339Nano, fmt.Sprint(rec["grace_start"]))
				return err == nil
			}
		}
		return false
	}, "the 'leading: scheduler and reapers started' log line")
	return at
}

// registeredAfter waits until the agent logs a registration after since
// and returns its time.
func registeredAfter(t *testing.T, agent *proc, since time.Time, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	waitFor(t, timeout, func() bool {
		for _, rec := range jsonLogLines(agent.logPath) {
			if rec["msg"] != "registered" {
				continue
			}
			if ts, err := time.Parse(time.RFC3339Nano, fmt.Sprint(rec["time"])); err == nil && ts.After(since) {
				at = ts
				return true
			}
		}
		return false
	}, agent.name+" registered again")
	return at
}

// waitTI polls until task's TI in run id satisfies cond and returns it.
func waitTI(t *testing.T, lite *liteProc, id int64, task string, timeout time.Duration, what string, cond func(protocol.TaskInstance) bool) protocol.TaskInstance {
	t.Helper()
	var found protocol.TaskInstance
	waitFor(t, timeout, func() bool {
		var d protocol.RunDetail
		if tryGetJSON(lite, fmt.Sprintf("/v1/runs/%d", id), &d) != nil {
			return false
		}
		for _, ti := range d.TaskInstances {
			if ti.TaskID == task {
				found = ti
				return cond(ti)
			}
		}
		return false
	}, fmt.Sprintf("task %s of run %d %s (last seen %q)", task, id, what, found.State))
	return found
}

// findEvent returns the first event matching cond, or nil.
func findEvent(events []protocol.Event, cond func(protocol.Event) bool) *protocol.Event {
	for i := range events {
		if cond(events[i]) {
			return &events[i]
		}
	}
	return nil
}

// tiCandidates indexes a report's task-instance candidates by decision,
// failing on a decision listed twice.
func tiCandidates(rep protocol.ReapReport) map[string]protocol.ReapCandidate {
	out := map[string]protocol.ReapCandidate{}
	for _, c := range rep.Candidates {
		if c.TIID == nil {
			continue
		}
		if _, dup := out[c.Decision]; dup {
			out[c.Decision+"#dup"] = c
			continue
		}
		out[c.Decision] = c
	}
	return out
}

// reapReport runs `vigil reap [--dry-run] -o json`.
func reapReport(t *testing.T, lite *liteProc, dryRun bool) protocol.ReapReport {
	t.Helper()
	args := []string{"reap", "-o", "json"}
	if dryRun {
		args = append(args, "--dry-run")
	}
	out, code := cli(t, lite, args...)
	require.Equal(t, 0, code, "vigil %s: %s", strings.Join(args, " "), out)
	var rep protocol.ReapReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), "vigil %s: %q", strings.Join(args, " "), out)
	return rep
}

var sweepLine = regexp.MustCompile(`(?m)^vigil_reaper_duration_seconds_count\{reaper="([^"]+)"\} (\S+)$`)

// sweepCount is how many sweeps (not dry runs) reaper has made, from a
// /metrics page.
func sweepCount(metrics, reaper string) float64 {
	for _, m := range sweepLine.FindAllStringSubmatch(metrics, -1) {
		if v, err := strconv.ParseFloat(m[2], 64); err == nil && m[1] == reaper {
			return v
		}
	}
	return 0
}

var decisionLine = regexp.MustCompile(`(?m)^vigil_scheduler_decisions_total\{decision="([^"]+)"\} (\S+)$`)

// decisionCounts parses vigil_scheduler_decisions_total out of a /metrics
// page; a decision never taken is absent (zero).
func decisionCounts(metrics string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range decisionLine.FindAllStringSubmatch(metrics, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err == nil {
			out[m[1]] = v
		}
	}
	return out
}

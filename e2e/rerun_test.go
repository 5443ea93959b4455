package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/store/storetest"
)

// tryHistory returns the tries of task in events, as "claimed #N" and
// "cleared #N: message" lines in order: the history a clear leaves.
func tryHistory(events []protocol.Event, task string) []string {
	var out []string
	for _, e := range events {
		if e.TaskID != task || e.TryNumber == nil {
			continue
		}
		switch e.Kind {
		case "ti_claimed", "ti_failed", "ti_success":
			out = append(out, fmt.Sprintf("%s #%d", strings.TrimPrefix(e.Kind, "ti_"), *e.TryNumber))
		case "ti_cleared":
			out = append(out, fmt.Sprintf("cleared #%d: %s", *e.TryNumber, e.Message))
		}
	}
	return out
}

// The rerun example's middle task fails on its first try (its marker
// file); `vigil runs clear --task transform --downstream` runs it again
// as try 2 and load after it, and the run ends success. Without --yes and
// with no terminal the clear refuses and changes nothing. The history
// shows both tries and who cleared.
func TestClearRerunsFailedMiddleTask(t *testing.T) {
	t.Parallel()
	lite := startLite(t, liteOpts{DAGs: filepath.Join(examplesDir, "rerun.yaml"), Agents: 1})
	d, code := triggerJSON(t, lite, "rerun", true)
	require.NotEqual(t, 0, code, "the run fails")
	require.Equal(t, "failed", d.State)
	require.Equal(t, "failed", taskInstance(t, d, "transform").State)
	require.Equal(t, "upstream_failed", taskInstance(t, d, "load").State)
	id := fmt.Sprint(d.ID)
	env := []string{"VIGIL_SERVER=" + lite.URL, "VIGIL_TOKEN=" + operatorToken}

	r := runVigil(t, env, "runs", "clear", id, "--task", "transform", "--downstream")
	assert.NotEqual(t, 0, r.Code)
	assert.Contains(t, r.Stderr, "pass --yes")
	assert.Equal(t, "failed", runDetail(t, lite, d.ID).State, "the refused clear changed nothing")

	r = runVigil(t, env, "runs", "clear", id, "--task", "transform", "--downstream", "--dry-run", "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var dry protocol.ClearResponse
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &dry), r.Stdout)
	assert.Equal(t, []protocol.ClearedTI{{TaskID: "transform", State: "failed", TryNumber: 1},
		{TaskID: "load", State: "upstream_failed"}}, dry.Cleared)

	r = runVigil(t, env, "runs", "clear", id, "--task", "transform", "--downstream", "--yes", "--reason", "source fixed")
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "cleared 2 task instances")
	after := waitRunState(t, lite, d.ID, "success", 60*time.Second)
	assert.Equal(t, 2, taskInstance(t, after, "transform").TryNumber)
	assert.Equal(t, "success", taskInstance(t, after, "load").State)

	events := runEvents(t, lite, d.ID)
	assert.Equal(t, []string{"claimed #1", "failed #1",
		"cleared #1: cleared by operator (try 1 was failed); the next try is 2: source fixed",
		"claimed #2", "success #2"}, tryHistory(events, "transform"))
	var kinds []string
	for _, e := range events {
		if e.TaskID == "" {
			kinds = append(kinds, e.Kind)
		}
	}
	assert.Equal(t, []string{"run_queued", "run_started", "run_failed", "run_reopened", "run_success"}, kinds)
	var tries []int
	for _, l := range taskLogs(t, lite, d.ID, "transform").Lines {
		if len(tries) == 0 || tries[len(tries)-1] != l.TryNumber {
			tries = append(tries, l.TryNumber)
		}
	}
	assert.Equal(t, []int{1, 2}, tries, "the logs of both tries are kept")
}

// A clear issued to a follower replica while the leader is being killed
// loses nothing: it is the API's own transaction, and the replica that
// takes over schedules the cleared task instances from run_dirty.
func TestProClearDuringLeaderFailover(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	rs := startReplicas(t, 2, storetest.DB(t), etcd)
	lead := waitOneLeader(t, rs)
	follower := rs[0]
	if follower == lead {
		follower = rs[1]
	}
	a := startAgent(t, []string{follower.url, lead.url}, agentToken, "clear-a1")
	agentID(t, a, 30*time.Second)
	env := []string{"VIGIL_SERVER=" + follower.url, "VIGIL_TOKEN=" + operatorToken}
	r := runVigil(t, env, "dags", "apply", examplePath(t, "rerun.yaml"))
	require.Equal(t, 0, r.Code, r.Stderr)
	r = runVigil(t, env, "runs", "trigger", "rerun", "--wait", "--poll", "200ms", "-o", "json")
	require.NotEqual(t, 0, r.Code, "the run fails: %s", r.Stderr)
	var d protocol.RunDetail
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &d), r.Stdout)
	require.Equal(t, "failed", d.State)

	lead.p.signal(syscall.SIGKILL)
	r = runVigil(t, env, "runs", "clear", fmt.Sprint(d.ID), "--yes", "--reason", "during failover")
	_, leaders := leaderOf(rs)
	t.Logf("clear answered with %d leaders (the lease of the killed one lasts 2s)", leaders)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "cleared 2 task instances")

	waitFor(t, 60*time.Second, func() bool {
		return tryGetJSONAt(follower.url, fmt.Sprintf("/v1/runs/%d", d.ID), &d) == nil && d.State == "success"
	}, fmt.Sprintf("run %d success after the failover (last seen %s)", d.ID, d.State))
	assert.Equal(t, 2, taskInstance(t, d, "transform").TryNumber)
	l, n := leaderOf(rs)
	assert.True(t, n == 1 && l == follower, "the follower took over")
}

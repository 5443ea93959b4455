package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/store/storetest"
)

// The console served by a follower of three real Pro replicas shows the
// same data as the leader: the Cluster page names the leader, its epoch
// and all three replicas, and a run's page shows the states the
// leader's API reports. The session signed in on the follower is
// accepted by the leader too (it is signed with the shared token).
func TestConsoleFromAProFollower(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	rs := startReplicas(t, 3, storetest.DB(t), etcd)
	lead := waitOneLeader(t, rs)
	follower := rs[0]
	if follower == lead {
		follower = rs[1]
	}
	agent := startAgent(t, []string{follower.url, lead.url}, agentToken, "pro-console-agent")
	agentID(t, agent, 30*time.Second)
	env := []string{"VIGIL_SERVER=" + follower.url, "VIGIL_TOKEN=" + operatorToken}
	r := runVigil(t, env, "dags", "apply", writeDAG(t, t.TempDir(), "slow.yaml", consoleDAGs["slow"]))
	require.Equal(t, 0, r.Code, r.Stderr)
	r = runVigil(t, env, "runs", "trigger", "slow", "--wait", "--poll", "200ms", "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var run protocol.RunDetail
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &run))

	b := startBrowser(t)
	b.signIn(follower.url, operatorToken, "operator")
	b.open(follower.url, "#/cluster", fmt.Sprintf(`[data-leader=%q]`, lead.id))
	for _, rep := range rs {
		b.waitFor("replica "+rep.id+" listed", fmt.Sprintf(`#replicas tr[data-replica=%q]`, rep.id))
	}
	assert.Contains(t, b.text("#leader"), follower.id+" (a follower)", "the page says which replica served it")
	var fromLeader protocol.Cluster
	getJSONFrom(t, lead.url, "/v1/cluster", &fromLeader)
	assert.Equal(t, lead.id, fromLeader.Leader)
	assert.Contains(t, b.text("#leader"), fmt.Sprint(fromLeader.Epoch), "the follower shows the leader's epoch")
	b.waitFor("the leader's reapers, as it published them", `#reapers tr[data-reaper="orphan"]`)
	b.shot("pro-cluster-from-follower")

	var leaderView protocol.RunDetail
	getJSONFrom(t, lead.url, fmt.Sprintf("/v1/runs/%d", run.ID), &leaderView)
	b.open(follower.url, fmt.Sprintf("#/runs/%d", run.ID), "#graph svg")
	for _, ti := range leaderView.TaskInstances {
		b.waitFor("task "+ti.TaskID+" as the leader reports it",
			fmt.Sprintf(`g.node[data-task=%q][data-state=%q]`, ti.TaskID, ti.State))
	}
	b.shot("pro-run-from-follower")
	// The same browser session reads the leader's console too.
	b.open(lead.url, fmt.Sprintf("#/runs/%d", run.ID), fmt.Sprintf(`[data-run-state=%q]`, leaderView.State))
}

// getJSONFrom GETs path from base with the operator token into out.
func getJSONFrom(t *testing.T, base, path string, out any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+operatorToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, path)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
}

package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// poolOf returns pool name as GET /v1/pools lists it, or nil.
func poolOf(t *testing.T, lite *liteProc, name string) *protocol.Pool {
	t.Helper()
	var list protocol.PoolList
	getJSON(t, lite, "/v1/pools", &list)
	for _, p := range list.Pools {
		if p.Name == name {
			return &p
		}
	}
	return nil
}

// consolePools creates and resizes a pool on the Pools page, each through
// its confirmation panel (Cancel changes nothing), sees a running task
// instance of it counted, and sees its deletion refused while a DAG
// names it, with the API's reason in the panel.
func consolePools(t *testing.T, b *browser, lite *liteProc) {
	b.open(lite.URL, "#/pools", "#pools tbody tr")
	b.run("a pool of 2", setValue("#pool-name", "warehouse"), setValue("#pool-slots", "2"), clickSel("#pool-set"))
	b.waitFor("the confirmation", "#pool-confirm")
	assert.Contains(t, b.text("#pool-confirm-what"), "Create pool warehouse with 2 slots")
	assert.Nil(t, poolOf(t, lite, "warehouse"), "nothing is created before the confirmation")
	b.run("confirm", clickSel("#pool-confirm"))
	b.waitFor("the pool is listed", `#pools tr[data-pool="warehouse"] td[data-slots="2"]`)
	require.NotNil(t, poolOf(t, lite, "warehouse"))

	b.run("resize it", clickSel(`#pools button[data-pool-action="edit"][data-pool="warehouse"]`), setValue("#pool-slots", "1"), clickSel("#pool-set"))
	b.waitFor("the confirmation", "#pool-confirm")
	assert.Contains(t, b.text("#pool-confirm-what"), "Resize pool warehouse from 2 to 1 slot")
	b.run("cancel", clickSel("#pool-cancel"))
	b.waitFor("the panel closes", "#pool-panel:empty")
	assert.Equal(t, 2, poolOf(t, lite, "warehouse").Slots, "Cancel changed nothing")
	b.run("resize again", clickSel("#pool-set"), waitVisible("#pool-confirm"), clickSel("#pool-confirm"))
	b.waitFor("1 slot", `#pools tr[data-pool="warehouse"] td[data-slots="1"]`)
	assert.Equal(t, 1, poolOf(t, lite, "warehouse").Slots)

	spec := "dag_id: pooled\ntasks:\n  - id: load\n    pool: warehouse\n    command: [sh, -c, 'sleep 2']\n"
	cliOK(t, lite, "dags", "apply", writeDAG(t, t.TempDir(), "pooled", spec))
	var runs []int64
	for range 2 {
		run, _ := triggerJSON(t, lite, "pooled", false)
		runs = append(runs, run.ID)
	}
	b.waitFor("one task instance runs and one waits for the slot",
		`#pools tr[data-pool="warehouse"]:has(td[data-running="1"]):has(td[data-queued="1"])`)
	b.shot("pools")
	b.run("delete it", clickSel(`#pools button[data-pool-action="delete"][data-pool="warehouse"]`))
	b.waitFor("the confirmation", "#pool-confirm")
	b.run("confirm", clickSel("#pool-confirm"))
	b.waitFor("the API's refusal", "#pool-error .error")
	b.shot("pool-delete-refused")
	assert.Contains(t, b.text("#pool-error"), "pooled", "the refusal names the DAG that uses the pool")
	require.NotNil(t, poolOf(t, lite, "warehouse"), "the pool is kept")
	for _, id := range runs {
		waitRunState(t, lite, id, "success", 30*time.Second)
	}
}

// viewerCannotSetPools: the viewer sees the Pools page with every button
// disabled.
func viewerCannotSetPools(t *testing.T, b *browser, lite *liteProc) {
	if poolOf(t, lite, "warehouse") == nil { // the pools subtest did not run
		cliOK(t, lite, "pools", "set", "warehouse", "--slots", "1")
	}
	b.open(lite.URL, "#/pools", `#pools tr[data-pool="warehouse"]`)
	b.waitFor("Set is disabled", "#pool-set[disabled]")
	assert.Equal(t, b.count(`#pools button[data-pool-action]`), b.count(`#pools button[data-pool-action][disabled]`),
		"every resize and delete button is disabled")
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/store/storetest"
)

// poolTI is one task instance of the pool as the database recorded it.
type poolTI struct {
	run                     int64
	dag, task               string
	weight, try             int
	state                   string
	queued, claimed, ending time.Time
}

func (p poolTI) String() string {
	return fmt.Sprintf("%s.%s run %d (weight %d, try %d, %s): queued %s claimed %s ended %s", p.dag, p.task, p.run,
		p.weight, p.try, p.state, p.queued.Format("15:04:05.000"), p.claimed.Format("15:04:05.000"), p.ending.Format("15:04:05.000"))
}

// readPoolTIs reads every TI of pool from the database, by claim time.
func readPoolTIs(t *testing.T, dbURL, pool string) []poolTI {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT run_id, dag_id, task_id, priority_weight, try_number, state,
		       coalesce(queued_at, 'epoch'), coalesce(claimed_at, 'epoch'), coalesce(end_date, 'epoch')
		  FROM task_instances WHERE pool = $1 ORDER BY claimed_at, id`, pool)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (poolTI, error) {
		var p poolTI
		err := r.Scan(&p.run, &p.dag, &p.task, &p.weight, &p.try, &p.state, &p.queued, &p.claimed, &p.ending)
		return p, err
	})
	require.NoError(t, err)
	return out
}

// TestProPoolOfOneAcrossLeaderKill: the two DAGs of examples/pools share
// pool warehouse of 1 slot; two agents, each claiming through another Pro
// replica, run them while the leader is killed with SIGKILL. From the
// times the database recorded (claimed_at to end_date, the span a try
// holds its slot), no two TIs of the pool ever held a slot at once, and
// whenever a TI was claimed, no TI of higher priority_weight was already
// waiting: the reports (weight 10), queued while a load ran, went before
// the loads queued earlier.
func TestProPoolOfOneAcrossLeaderKill(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	dbURL := storetest.DB(t)
	rs := startReplicas(t, 2, dbURL, etcd)
	lead := waitOneLeader(t, rs)
	follower := rs[0]
	if follower == lead {
		follower = rs[1]
	}
	a1 := startAgent(t, []string{lead.url, follower.url}, agentToken, "pool-a1", "--capacity", "4")
	a2 := startAgent(t, []string{follower.url, lead.url}, agentToken, "pool-a2", "--capacity", "4")
	agentID(t, a1, 30*time.Second)
	agentID(t, a2, 30*time.Second)

	env := []string{"VIGIL_SERVER=" + follower.url, "VIGIL_TOKEN=" + operatorToken}
	vigil := func(args ...string) string {
		r := runVigil(t, env, args...)
		require.Equal(t, 0, r.Code, "vigil %s: %s", strings.Join(args, " "), r.Stderr)
		return r.Stdout
	}
	vigil("pools", "set", "warehouse", "--slots", "1")
	examples, err := filepath.Abs(filepath.Join(examplesDir, "pools"))
	require.NoError(t, err)
	vigil("dags", "apply", examples)
	trigger := func(dagID string) int64 {
		var run protocol.Run
		require.NoError(t, json.Unmarshal([]byte(vigil("runs", "trigger", dagID, "-o", "json")), &run))
		return run.ID
	}
	runs := []int64{trigger("pools-load"), trigger("pools-load")}
	waitFor(t, 30*time.Second, func() bool {
		tis := readPoolTIs(t, dbURL, "warehouse")
		return len(tis) > 0 && !tis[0].claimed.Equal(time.Unix(0, 0))
	}, "a load holds the slot")
	runs = append(runs, trigger("pools-report"), trigger("pools-report"))

	// Kill the leader once a TI of the pool has ended, with most still to go.
	waitFor(t, 30*time.Second, func() bool {
		for _, p := range readPoolTIs(t, dbURL, "warehouse") {
			if p.state == "success" {
				return true
			}
		}
		return false
	}, "a TI of the pool ended")
	lead.p.signal(syscall.SIGKILL)
	var next *replica
	waitFor(t, 15*time.Second, func() bool {
		l, n := leaderOf(rs)
		next = l
		return n == 1 && l != lead
	}, "a new leader")
	t.Logf("killed leader %s; %s leads", lead.id, next.id)

	for _, id := range runs {
		var d protocol.RunDetail
		waitFor(t, 60*time.Second, func() bool {
			r := runVigil(t, env, "runs", "show", fmt.Sprint(id), "-o", "json")
			if r.Code != 0 || json.Unmarshal([]byte(r.Stdout), &d) != nil {
				return false
			}
			return d.State == "success" || d.State == "failed" || d.State == "cancelled"
		}, fmt.Sprintf("run %d ends", id))
		require.Equal(t, "success", d.State, "run %d", id)
	}

	tis := readPoolTIs(t, dbURL, "warehouse")
	var lines []string
	for _, p := range tis {
		lines = append(lines, p.String())
	}
	history := strings.Join(lines, "\n")
	t.Logf("the pool's TIs by claim:\n%s", history)
	require.Len(t, tis, 8, "three loads and a report, each DAG twice")
	for i, p := range tis {
		require.Equal(t, 1, p.try, "one try each (a second would hide the first's span): %s", p)
		require.True(t, p.ending.After(p.claimed), "%s", p)
		if i > 0 {
			prev := tis[i-1]
			assert.False(t, p.claimed.Before(prev.ending),
				"two TIs of a pool of 1 held the slot at once:\n  %s\n  %s", prev, p)
		}
		// A TI queued this long before another's claim was visible to it.
		for _, q := range tis {
			if q.weight > p.weight && q.queued.Add(200*time.Millisecond).Before(p.claimed) {
				assert.False(t, q.claimed.After(p.claimed),
					"%s was claimed while %s, of higher weight, waited", p, q)
			}
		}
	}
	overtook := false // a report claimed before a load queued earlier than it
	for _, r := range tis {
		for _, l := range tis {
			overtook = overtook || r.dag == "pools-report" && l.dag == "pools-load" &&
				l.queued.Before(r.queued) && r.claimed.Before(l.claimed)
		}
	}
	assert.True(t, overtook, "no report went before an earlier load: priority was never exercised:\n%s", history)

	var pools protocol.PoolList
	require.NoError(t, json.Unmarshal([]byte(vigil("pools", "list", "-o", "json")), &pools))
	require.Len(t, pools.Pools, 1)
	assert.Equal(t, protocol.Pool{Name: "warehouse", Slots: 1, UpdatedAt: pools.Pools[0].UpdatedAt}, pools.Pools[0],
		"every slot released, nothing queued")
}

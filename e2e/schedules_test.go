package e2e

import (
	"context"
	"encoding/json"
	"fmt"
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

// every2s is the schedule of the e2e schedule tests: a slot every 2 s.
const every2s = 2 * time.Second

// dbNow reads the database clock, the one slots are due on.
func dbNow(t *testing.T, db *pgx.Conn) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, db.QueryRow(context.Background(), `SELECT now()`).Scan(&now))
	return now.UTC()
}

// slotRun is one scheduled run as the database holds it.
type slotRun struct {
	ID       int64
	Logical  time.Time
	QueuedAt time.Time
	Created  int // its slot_created events
}

// scheduledRuns returns dagID's scheduled runs, oldest slot first.
func scheduledRuns(t *testing.T, db *pgx.Conn, dagID string) []slotRun {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT r.id, r.logical_date, r.queued_at,
		       (SELECT count(*) FROM events e WHERE e.run_id = r.id AND e.kind = 'slot_created')
		  FROM runs r WHERE r.dag_id = $1 AND r.run_type = 'scheduled' ORDER BY r.logical_date, r.id`, dagID)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (slotRun, error) {
		var s slotRun
		err := r.Scan(&s.ID, &s.Logical, &s.QueuedAt, &s.Created)
		s.Logical, s.QueuedAt = s.Logical.UTC(), s.QueuedAt.UTC()
		return s, err
	})
	require.NoError(t, err)
	return out
}

// lastDue is the latest slot of an @every 2s schedule from start whose
// interval has ended by now.
func lastDue(start, now time.Time) time.Time {
	k := int(now.Sub(start)/every2s) - 1
	return start.Add(time.Duration(k) * every2s)
}

// waitSlot waits until dagID has a scheduled run at a slot at or after
// want.
func waitSlot(t *testing.T, db *pgx.Conn, dagID string, want time.Time, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, func() bool {
		runs := scheduledRuns(t, db, dagID)
		return len(runs) > 0 && !runs[len(runs)-1].Logical.Before(want)
	}, fmt.Sprintf("a scheduled run of %s at slot %s", dagID, want.Format(time.RFC3339)))
}

// assertEverySlotOnce checks, from the database, that dagID has exactly
// one scheduled run for every slot from start through last and none
// between them, each with one slot_created event.
func assertEverySlotOnce(t *testing.T, db *pgx.Conn, dagID string, start, last time.Time) []slotRun {
	t.Helper()
	runs := scheduledRuns(t, db, dagID)
	byLogical := map[time.Time]int{}
	for _, r := range runs {
		byLogical[r.Logical]++
		assert.Equal(t, 1, r.Created, "run %d (slot %s): slot_created events", r.ID, r.Logical.Format(time.RFC3339))
		assert.Zero(t, r.Logical.Sub(start)%every2s, "run %d at %s is off the schedule's grid", r.ID, r.Logical)
	}
	var missing, doubled []string
	n := 0
	for sl := start; !sl.After(last); sl = sl.Add(every2s) {
		n++
		switch c := byLogical[sl]; {
		case c == 0:
			missing = append(missing, sl.Format(time.RFC3339))
		case c > 1:
			doubled = append(doubled, fmt.Sprintf("%s x%d", sl.Format(time.RFC3339), c))
		}
	}
	assert.Empty(t, missing, "slots without a run (gaps)")
	assert.Empty(t, doubled, "slots with more than one run (duplicates)")
	t.Logf("%s: %d slots from %s to %s, %d scheduled runs", dagID, n, start.Format(time.RFC3339), last.Format(time.RFC3339), len(runs))
	return runs
}

// scheduleDAG is an @every 2s DAG starting at start, with a task that
// never gets an agent in Pro (nothing claims it) and is `true` in Lite.
func scheduleDAG(dagID string, start time.Time, catchup bool) string {
	return fmt.Sprintf("dag_id: %s\nschedule: \"@every 2s\"\nstart_date: %s\ncatchup: %t\nmax_active_runs: 200\n"+
		"tasks:\n  - id: a\n    command: [\"true\"]\n", dagID, start.Format(time.RFC3339), catchup)
}

// The Pro scenario: three replicas, an @every 2s DAG with catchup,
// the leader killed -9, later the new leader SIGSTOPped past the election
// TTL and resumed, over about 30 s. From the database: every slot of the
// window has exactly one scheduled run, no gap and no duplicate.
func TestProScheduleSlotsExactlyOnceAcrossFailovers(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t)
	dbURL := storetest.DB(t)
	db := connectDB(t, dbURL)
	rs := startReplicas(t, 3, dbURL, etcd)
	var lead *replica
	waitFor(t, 20*time.Second, func() bool { l, n := leaderOf(rs); lead = l; return n == 1 }, "exactly one leader")

	start := dbNow(t, db).Truncate(time.Second).Add(-4 * time.Second)
	spec := writeDAG(t, t.TempDir(), "every2s", scheduleDAG("every2s", start, true))
	follower := rs[0]
	if follower == lead {
		follower = rs[1]
	}
	env := []string{"VIGIL_SERVER=" + follower.url, "VIGIL_TOKEN=" + operatorToken}
	r := runVigil(t, env, "dags", "apply", spec)
	require.Equal(t, 0, r.Code, r.Stderr)
	// advance waits until the schedule has created k more slots.
	advance := func(k int, what string) {
		t.Helper()
		waitSlot(t, db, "every2s", lastDue(start, dbNow(t, db)).Add(time.Duration(k-1)*every2s), 30*time.Second)
		t.Logf("%s: slots through %s created", what, lastDue(start, dbNow(t, db)).Format(time.RFC3339))
	}
	advance(4, "leader "+lead.id)

	lead.p.kill(t)
	survivors := []*replica{}
	for _, r := range rs {
		if r != lead {
			survivors = append(survivors, r)
		}
	}
	var second *replica
	waitFor(t, 20*time.Second, func() bool { l, n := leaderOf(survivors); second = l; return n == 1 }, "a new leader after kill -9")
	advance(4, "after kill -9 of "+lead.id+", leader "+second.id)

	t.Cleanup(func() { second.p.signal(syscall.SIGCONT) })
	second.p.signal(syscall.SIGSTOP)
	stopped := time.Now()
	var third *replica
	for _, r := range survivors {
		if r != second {
			third = r
		}
	}
	waitFor(t, 20*time.Second, func() bool { h, ok := third.health(); return ok && h.Leader != nil && h.Leader.Leading },
		third.id+" leads while "+second.id+" is stopped")
	advance(3, "with "+second.id+" stopped, leader "+third.id)
	// Resume it only once it has been stopped past the election TTL (2s)
	// with room to spare, whatever the pace of the slots above.
	waitFor(t, 10*time.Second, func() bool { return time.Since(stopped) > 2*time.Second+time.Second }, second.id+" stopped past the TTL")
	t.Logf("%s stopped for %s (election TTL 2s)", second.id, time.Since(stopped).Round(time.Millisecond))
	second.p.signal(syscall.SIGCONT)
	waitFor(t, 20*time.Second, func() bool { h, ok := second.health(); return ok && h.Leader != nil && !h.Leader.Leading },
		second.id+" resumes as a follower")
	advance(6, "after SIGCONT of "+second.id)

	end := lastDue(start, dbNow(t, db))
	waitSlot(t, db, "every2s", end, 10*time.Second)
	runs := assertEverySlotOnce(t, db, "every2s", start, end)
	require.GreaterOrEqual(t, len(runs), 14, "the window holds the slots of about 30 s")
	l, n := leaderOf([]*replica{second, third})
	assert.Equal(t, 1, n, "exactly one leader at the end")
	assert.Equal(t, third, l)
}

// The Lite scenario: Lite stopped for 10 s and restarted on the
// same database and data directory. With catchup on, every slot missed
// while it was down is created exactly once; with catchup off, only the
// latest due slot is, and its slots_skipped event counts the others.
func TestLiteRestartCatchupAndNoCatchup(t *testing.T) {
	t.Parallel()
	dbURL := storetest.DB(t)
	db := connectDB(t, dbURL)
	start := dbNow(t, db).Truncate(time.Second).Add(-2 * time.Second)
	dags := t.TempDir()
	writeDAG(t, dags, "catch", scheduleDAG("catch", start, true))
	writeDAG(t, dags, "nocatch", scheduleDAG("nocatch", start, false))
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 1, DatabaseURL: dbURL})
	waitSlot(t, db, "catch", start.Add(2*every2s), 30*time.Second)
	waitSlot(t, db, "nocatch", start.Add(2*every2s), 30*time.Second)

	lite.Stop()
	down := dbNow(t, db)
	before := scheduledRuns(t, db, "nocatch")
	lastBefore := before[len(before)-1].Logical
	time.Sleep(10 * time.Second) // the scenario: Lite is down for 10 s
	up := dbNow(t, db)
	lite.Restart()
	t.Logf("Lite down from %s to %s", down.Format(time.RFC3339Nano), up.Format(time.RFC3339Nano))

	// Catchup: every slot, including those due while Lite was down, once.
	end := lastDue(start, up).Add(every2s)
	waitSlot(t, db, "catch", end, 30*time.Second)
	runs := assertEverySlotOnce(t, db, "catch", start, end)
	missed := 0
	for _, r := range runs {
		if r.Logical.Add(every2s).After(down) && !r.Logical.Add(every2s).After(up) {
			missed++
			assert.True(t, r.QueuedAt.After(up), "slot %s fell due while Lite was down: created after the restart", r.Logical)
		}
	}
	assert.GreaterOrEqual(t, missed, 4, "slots that fell due during the 10 s stop")

	// No catchup: the first slot after the stop is the latest due one at
	// the restart; those between were skipped, and its event says how many.
	waitSlot(t, db, "nocatch", lastBefore.Add(every2s), 30*time.Second)
	var first slotRun
	for _, r := range scheduledRuns(t, db, "nocatch") {
		if r.Logical.After(lastBefore) {
			first = r
			break
		}
	}
	skipped := int(first.Logical.Sub(lastBefore)/every2s) - 1
	assert.GreaterOrEqual(t, skipped, 4, "slots between %s and %s", lastBefore, first.Logical)
	assert.False(t, first.Logical.Add(every2s).After(first.QueuedAt), "the slot was due when its run was created")
	var msg string
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT message FROM events WHERE run_id = $1 AND kind = 'slots_skipped'`, first.ID).Scan(&msg))
	assert.Equal(t, fmt.Sprintf("catchup is off: %d earlier due slots skipped", skipped), msg)
	var between int
	require.NoError(t, db.QueryRow(context.Background(), `SELECT count(*) FROM runs WHERE dag_id = 'nocatch'
		AND run_type = 'scheduled' AND logical_date > $1 AND logical_date < $2`, lastBefore, first.Logical).Scan(&between))
	assert.Zero(t, between, "no run for a skipped slot")
}

// Run parameters and backfill through the real CLI and server: a task
// sees its run's conf as VIGIL_PARAM_<KEY> (defaults filled), a rejected
// key exits 2 with the server's message, and a backfill creates its runs
// once, each seeing its logical date.
func TestConfAndBackfillReachTasks(t *testing.T) {
	t.Parallel()
	dags := t.TempDir()
	writeDAG(t, dags, "export", `
dag_id: export
schedule: "@daily"
start_date: 2025-01-01T00:00:00Z
paused: true
params:
  region: {type: string, default: eu}
  limit: {type: int}
tasks:
  - id: show
    command: ["sh", "-c", "echo type=$VIGIL_RUN_TYPE region=$VIGIL_PARAM_REGION limit=${VIGIL_PARAM_LIMIT:-none} logical=${VIGIL_LOGICAL_DATE:-none}"]
`)
	lite := startLite(t, liteOpts{DAGs: dags, Agents: 1})
	stdout := func(id int64) string {
		var out []string
		for _, l := range taskLogs(t, lite, id, "show").Lines {
			if l.Stream == "stdout" {
				out = append(out, l.Line)
			}
		}
		return strings.Join(out, "\n")
	}

	out, code := cli(t, lite, "runs", "trigger", "export", "--conf", "limit=7", "--wait", "--poll", "200ms", "-o", "json")
	require.Equal(t, 0, code, out)
	var run protocol.RunDetail
	require.NoError(t, json.Unmarshal([]byte(out), &run))
	assert.Equal(t, "type=manual region=eu limit=7 logical=none", stdout(run.ID))

	r := runVigil(t, []string{"VIGIL_SERVER=" + lite.URL, "VIGIL_TOKEN=" + operatorToken},
		"runs", "trigger", "export", "--conf", "limt=7")
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, `conf rejected: dag "export": conf key "limt": unknown param: the DAG declares limit, region`)

	args := []string{"dags", "backfill", "export", "--from", "2025-01-01T00:00:00Z", "--to", "2025-01-02T00:00:00Z", "-o", "json"}
	out, code = cli(t, lite, args...)
	require.Equal(t, 0, code, out)
	var bf protocol.BackfillResponse
	require.NoError(t, json.Unmarshal([]byte(out), &bf))
	assert.Equal(t, 2, bf.Created)
	require.Len(t, bf.RunIDs, 2)
	out, code = cli(t, lite, args...)
	require.Equal(t, 0, code, out)
	require.NoError(t, json.Unmarshal([]byte(out), &bf))
	assert.Equal(t, 0, bf.Created, "a repeat creates nothing")
	assert.Equal(t, 2, bf.Existing)

	out, code = cli(t, lite, "runs", "list", "--dag", "export", "-o", "json")
	require.Equal(t, 0, code, out)
	var list protocol.RunList
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	var backfills []protocol.Run
	for _, r := range list.Runs {
		assert.NotEqual(t, "scheduled", r.RunType, "the DAG is paused: its schedule creates nothing")
		if r.RunType == "backfill" {
			backfills = append(backfills, r)
		}
	}
	require.Len(t, backfills, 2, "a paused DAG is backfilled")
	for _, b := range backfills {
		d := waitRunState(t, lite, b.ID, "success", 30*time.Second)
		assert.Equal(t, fmt.Sprintf("type=backfill region=eu limit=none logical=%s", d.LogicalDate.UTC().Format(time.RFC3339)), stdout(b.ID))
	}
}

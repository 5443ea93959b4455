package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/internal/testhook"
	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// adr/0010: a Pro leader frozen (SIGSTOP) inside a leader transaction, its
// FOR SHARE lock on leader_fence held, does not stop the cluster. Its idle
// session is ended by PostgreSQL (leader-idle-timeout < election TTL), a
// follower is elected when its lease runs out and takes the fence, and it
// schedules. When the old leader wakes up, its write in that same
// transaction fails and it stops leading.
//
// Driven by the test hook testhook.EnvHoldLeaderTx (only r1 has it, in a
// vigil built with the test hooks, testHookBin): r1 writes the marker once
// it holds its first fenced transaction open, and <marker>.result once its
// deposed write was tried.
func TestProFrozenLeaderInsideTransaction(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	idle := store.DefaultLeaderTimeouts(ttl).IdleInTransaction // 1.5s, the replicas' default
	etcd := etcdtest.Start(t)
	dbURL := storetest.DB(t)
	db := connectDB(t, dbURL)
	flags := []string{"--election-ttl", ttl.String()}
	marker := filepath.Join(t.TempDir(), "leader-tx-held")
	r1, oldEpoch := startHeldLeader(t, dbURL, etcd, marker, flags)
	others := startFollowers(t, dbURL, etcd, flags)
	env := []string{"VIGIL_SERVER=" + others[0].url, "VIGIL_TOKEN=" + operatorToken}
	spec := writeDAG(t, t.TempDir(), "frozen", "dag_id: frozen\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	require.Equal(t, 0, runVigil(t, env, "dags", "apply", spec).Code)

	frozen := time.Now()
	r1.p.signal(syscall.SIGSTOP)
	budget := ttl + idle + 2*time.Second
	run := triggerRun(t, env, "frozen")
	api := &liteProc{URL: others[0].url} // all tryGetJSON needs
	var next *replica
	waitFor(t, budget-time.Since(frozen), func() bool {
		var d protocol.RunDetail
		l, n := leaderOf(others)
		next = l
		return n == 1 && tryGetJSON(api, fmt.Sprintf("/v1/runs/%d", run), &d) == nil && d.State != "queued"
	}, "another replica leads and starts the run (a fenced write)")
	t.Logf("SIGSTOP r1: %s leads and started run %d after %s (TTL %s + idle %s + 2s = %s)",
		next.id, run, time.Since(frozen).Round(time.Millisecond), ttl, idle, budget)
	epoch, holder := fence(t, db)
	assert.Greater(t, epoch, oldEpoch, "the fence moved to a newer epoch")
	assert.Equal(t, next.id, holder)
	assert.Contains(t, eventKinds(t, env, run), "run_started")

	r1.p.signal(syscall.SIGCONT)
	releaseHeldTx(t, marker)
	assertDeposedLeaderWroteNothing(t, db, r1, marker, next)
	l, n := leaderOf(append(others, r1))
	assert.Equal(t, 1, n, "exactly one leader")
	assert.Equal(t, next, l)
}

// startFollowers starts replicas r2 and r3 with flags and waits until
// both serve and campaign behind r1.
func startFollowers(t *testing.T, dbURL string, etcd, flags []string) []*replica {
	t.Helper()
	others := []*replica{
		startReplica(t, "r2", dbURL, etcd, nil, flags...),
		startReplica(t, "r3", dbURL, etcd, nil, flags...),
	}
	for _, r := range others {
		waitFor(t, readyTimeout, func() bool {
			h, ok := r.health()
			return ok && h.Leader != nil && h.Leader.Leader == "r1"
		}, r.id+" serves and campaigns behind r1")
	}
	return others
}

// startHeldLeader starts replica r1 alone, with the test hook writing
// marker, and waits until it leads and holds its first leader transaction
// open; it returns r1 and its epoch. A cleanup sends SIGCONT before the
// harness stops it, in case the test ends while r1 is stopped.
func startHeldLeader(t *testing.T, dbURL string, etcd []string, marker string, flags []string) (*replica, int64) {
	t.Helper()
	bin, err := testHookBin()
	require.NoError(t, err, "build vigil with the test hooks")
	r1 := startReplicaBin(t, bin, "r1", dbURL, etcd, []string{testhook.EnvHoldLeaderTx + "=" + marker}, flags...)
	t.Cleanup(func() { r1.p.signal(syscall.SIGCONT) })
	var epoch int64
	waitFor(t, readyTimeout, func() bool {
		h, ok := r1.health()
		if !ok || h.Leader == nil || !h.Leader.Leading || !fileExists(marker) {
			return false
		}
		epoch = h.Leader.Epoch
		return true
	}, "r1 leads and holds a leader transaction open")
	t.Logf("r1 leads with epoch %d and holds a leader transaction (%s)", epoch, strings.TrimSpace(readFile(t, marker)))
	return r1, epoch
}

// releaseHeldTx lets the held leader transaction of the test hook go on
// to its write (testhook.HoldLeaderTx).
func releaseHeldTx(t *testing.T, marker string) {
	t.Helper()
	require.NoError(t, os.WriteFile(marker+".release", nil, 0o600))
}

// assertDeposedLeaderWroteNothing checks the woken r1: its write in the
// held transaction failed because PostgreSQL had ended the idle session,
// the row never appears, r1 stops leading, and the fence stays with next.
func assertDeposedLeaderWroteNothing(t *testing.T, db *pgx.Conn, r1 *replica, marker string, next *replica) {
	t.Helper()
	result := marker + ".result"
	waitFor(t, 30*time.Second, func() bool { return fileExists(result) }, "r1 tried its deposed write")
	outcome := readFile(t, result)
	t.Logf("r1's deposed write: %s", strings.TrimSpace(outcome))
	assert.True(t, strings.HasPrefix(outcome, "failed: "), "deposed write: %s", outcome)
	assert.Contains(t, outcome, "25P03", "PostgreSQL ended r1's idle leader session (idle_in_transaction_session_timeout)")
	waitFor(t, 15*time.Second, func() bool {
		h, ok := r1.health()
		return ok && h.Leader != nil && !h.Leader.Leading
	}, "r1 no longer leads")
	assert.Contains(t, readFile(t, r1.p.logPath), `"msg":"stopped leading"`)
	epoch, holder := fence(t, db)
	assert.Equal(t, next.id, holder)
	// Nothing of r1's lands later either.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		require.False(t, settingExists(t, db, testhook.DeposedWriteSetting), "the deposed write never landed")
		e, h := fence(t, db)
		require.Equal(t, []any{epoch, holder}, []any{e, h}, "the fence stays with %s", next.id)
	}
}

// Bad leader timeouts stop `vigil server` before it connects: exit 2, and
// the error names the flag, the rule and the numbers.
func TestProLeaderTimeoutFlagsValidated(t *testing.T) {
	t.Parallel()
	base := []string{"server", "--database-url", "postgres://127.0.0.1:1/none", "--etcd-endpoints", "127.0.0.1:1",
		"--agent-token", agentToken, "--operator-token", operatorToken, "--log-format", "json", "--election-ttl", "4s"}
	r := runVigil(t, nil, append(base, "--leader-idle-timeout", "4s")...)
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "leader-idle-timeout: 4s must be < the election TTL 4s (4s ≥ 4s)")
	assert.Contains(t, r.Stderr, "TTL/2 = 2s")
	r = runVigil(t, []string{"VIGIL_LEADER_STATEMENT_TIMEOUT=1s"}, append(base, "--leader-lock-timeout", "2s")...)
	assert.Equal(t, 2, r.Code)
	assert.Contains(t, r.Stderr, "leader-statement-timeout: 1s must be > leader-lock-timeout 2s (1s ≤ 2s)")
}

// connectDB opens a connection to the test's database, closed at cleanup.
func connectDB(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), httpTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// fence reads leader_fence's epoch and holder.
func fence(t *testing.T, db *pgx.Conn) (int64, string) {
	t.Helper()
	var epoch int64
	var holder *string
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT epoch, holder FROM leader_fence WHERE name = $1`, store.FenceName).Scan(&epoch, &holder))
	if holder == nil {
		return epoch, ""
	}
	return epoch, *holder
}

// settingExists reports whether the settings table has a row name.
func settingExists(t *testing.T, db *pgx.Conn, name string) bool {
	t.Helper()
	var v string
	err := db.QueryRow(context.Background(), `SELECT value FROM settings WHERE name = $1`, name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return false
	}
	require.NoError(t, err)
	t.Logf("settings %s = %q", name, v)
	return true
}

// triggerRun runs `vigil runs trigger dag -o json` with env and returns
// the run id.
func triggerRun(t *testing.T, env []string, dag string) int64 {
	t.Helper()
	r := runVigil(t, env, "runs", "trigger", dag, "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var run protocol.Run
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &run))
	return run.ID
}

// eventKinds is `vigil runs events RUN -o json`, reduced to the kinds.
func eventKinds(t *testing.T, env []string, run int64) []string {
	t.Helper()
	r := runVigil(t, env, "runs", "events", fmt.Sprint(run), "-o", "json")
	require.Equal(t, 0, r.Code, r.Stderr)
	var list protocol.EventList // the API's shape (GET /v1/runs/{id}/events)
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &list))
	evs := list.Events
	kinds := make([]string, len(evs))
	for i, e := range evs {
		kinds[i] = e.Kind
	}
	return kinds
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

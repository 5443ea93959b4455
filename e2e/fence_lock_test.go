package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/store/storetest"
)

// docs/design.md §8: the fence check's row lock is what keeps a deposed
// leader from writing after the fence moved. r1 leads and holds a leader
// transaction open just after its fence check (the test hook); its etcd
// lease is revoked, so r2 or r3 is elected at once, long before
// PostgreSQL's idle-in-transaction timeout would end r1's session; then,
// once the new leader has either moved the fence or is seen waiting for
// the fence row's lock, r1's held transaction goes on to write and commit.
// The write may commit only while the fence still holds r1's epoch: with
// the lock, the new leader waits until r1's transaction ends and takes
// the fence after it; without it (make mutants: mutant_fence_nolock) the
// fence moves under r1's open transaction and r1's write lands in the
// new term, which this test reports.
func TestProFenceRowLockKeepsADeposedLeaderOut(t *testing.T) {
	t.Parallel()
	// A long TTL gives the idle-in-transaction timeout (TTL/2 = 5s) room:
	// the election here comes from the revoked lease, not from the TTL.
	flags := []string{"--election-ttl", "10s", "--agent-lost-threshold", "15s"}
	etcd := etcdtest.Start(t)
	dbURL := storetest.DB(t)
	db := connectDB(t, dbURL)
	marker := filepath.Join(t.TempDir(), "leader-tx-held")
	_, oldEpoch := startHeldLeader(t, dbURL, etcd, marker, flags)
	others := startFollowers(t, dbURL, etcd, flags)

	revokeLease(t, etcd, "r1")
	var moved, waiting bool
	waitFor(t, 4*time.Second, func() bool {
		epoch, holder := fence(t, db)
		moved = epoch != oldEpoch || holder != "r1"
		waiting = fenceLockWaiters(t, db) > 0
		return moved || waiting
	}, "a new leader moves the fence or waits for its row lock")
	t.Logf("r1's lease revoked: the new leader %s", map[bool]string{true: "moved the fence", false: "waits for the fence row's lock"}[moved])
	releaseHeldTx(t, marker)

	result := marker + ".result"
	waitFor(t, 30*time.Second, func() bool { return fileExists(result) }, "r1 tried its write")
	outcome := strings.TrimSpace(readFile(t, result))
	t.Logf("r1's write in its held transaction: %s", outcome)
	if moved {
		require.True(t, strings.HasPrefix(outcome, "failed: "),
			"a deposed leader's write committed after the fence moved past its epoch %d: the fence check did not keep the fence row locked (%s)",
			oldEpoch, outcome)
	}
	next := waitOneLeader(t, others)
	waitFor(t, 15*time.Second, func() bool {
		epoch, holder := fence(t, db)
		return epoch > oldEpoch && holder == next.id
	}, "the fence moves to "+next.id+" once r1's transaction ended")
}

// revokeLease revokes the etcd lease behind replica id's campaign key,
// as its session's expiry would, without waiting out the TTL.
func revokeLease(t *testing.T, endpoints []string, id string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, leader.DefaultEtcdPrefix, clientv3.WithPrefix())
	require.NoError(t, err)
	for _, kv := range resp.Kvs {
		if string(kv.Value) == id {
			_, err := cli.Revoke(ctx, clientv3.LeaseID(kv.Lease))
			require.NoError(t, err)
			return
		}
	}
	t.Fatalf("no campaign key of %s under %s", id, leader.DefaultEtcdPrefix)
}

// fenceLockWaiters counts the sessions waiting for a lock in a statement
// on leader_fence: a new leader's fence acquisition behind an older
// term's transaction.
func fenceLockWaiters(t *testing.T, db *pgx.Conn) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(context.Background(), `
		SELECT count(*) FROM pg_stat_activity
		 WHERE wait_event_type = 'Lock' AND query ILIKE '%leader_fence%' AND pid <> pg_backend_pid()`).Scan(&n))
	return n
}

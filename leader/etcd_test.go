package leader

// In-package tests of the Pro elector against a real embedded etcd
// (leader/etcdtest) and a real PostgreSQL (store/storetest). TestMain is the
// one in static_test.go (package leader_test), which runs storetest.Main
// for the whole test binary.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/internal/testlog"
	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// testTTL is the session TTL of these tests: the shortest etcd honours.
const testTTL = 2 * time.Second

// replica is one elector with its own etcd client, running Run until the
// test ends.
type replica struct {
	id      string
	e       *Etcd
	cli     *clientv3.Client
	logs    *testlog.Buffer
	m       *metrics.Metrics
	done    chan error // Run's result
	stopped chan error // OnStoppedLeading's err, one per term
}

// fencedWork writes through the fence every 20 ms until its term ends,
// like the scheduler; a fenced error ends the term.
func fencedWork(st *store.Store) func(ctx context.Context, term Term) error {
	return func(ctx context.Context, term Term) error {
		for {
			if _, err := st.StartQueuedRuns(ctx, term.Epoch); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

func startReplica(t *testing.T, endpoints []string, st *store.Store, id string,
	work func(ctx context.Context, term Term) error) *replica {
	t.Helper()
	r := &replica{
		id:      id,
		cli:     etcdtest.NewClient(t, endpoints),
		logs:    &testlog.Buffer{},
		m:       metrics.New(),
		done:    make(chan error, 1),
		stopped: make(chan error, 100),
	}
	var err error
	r.e, err = NewEtcd(EtcdConfig{
		Client:  r.cli,
		Store:   st,
		Self:    id,
		TTL:     testTTL,
		Logger:  slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics: r.m,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		r.done <- r.e.Run(ctx, Callbacks{
			OnStartedLeading: work,
			OnStoppedLeading: func(_ Term, err error) { r.stopped <- err },
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.done:
			assert.NoError(t, err, "Run of %s", id)
		case <-time.After(10 * time.Second):
			t.Errorf("Run of %s did not return after its context was cancelled", id)
		}
		if t.Failed() {
			t.Logf("logs of %s:\n%s", id, r.logs.String())
		}
	})
	return r
}

// leaders returns the replicas whose Status says they lead.
func leaders(rs []*replica) []*replica {
	var out []*replica
	for _, r := range rs {
		if r.e.Status().Leading {
			out = append(out, r)
		}
	}
	return out
}

// waitLeader polls every millisecond until exactly one replica other than
// except leads, and returns it.
func waitLeader(t *testing.T, rs []*replica, except *replica, timeout time.Duration) *replica {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ls := leaders(rs); len(ls) >= 1 {
			for _, l := range ls {
				if l != except {
					return l
				}
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no replica (other than %v) leads after %v", except, timeout)
	return nil
}

// leaderKey reads the election's leader key (the first created under the
// prefix) with a separate client.
func leaderKey(t *testing.T, cli *clientv3.Client) (value string, createRev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, DefaultEtcdPrefix+"/", clientv3.WithFirstCreate()...)
	require.NoError(t, err)
	require.NotEmpty(t, resp.Kvs, "no leader key")
	return string(resp.Kvs[0].Value), resp.Kvs[0].CreateRevision
}

// settle waits until n candidates have keys, then lets their campaign
// watches sync: a watch created at an older revision is "unsynced" in etcd
// and catches up only every 100 ms, which a steady cluster does not see.
func settle(t *testing.T, cli *clientv3.Client, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := cli.Get(context.Background(), DefaultEtcdPrefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == n
	}, 5*time.Second, 10*time.Millisecond, "%d candidates campaign", n)
	time.Sleep(300 * time.Millisecond)
}

func TestNewEtcdValidatesConfig(t *testing.T) {
	t.Parallel()
	cli, st := &clientv3.Client{}, &store.Store{}
	ok := EtcdConfig{Client: cli, Store: st, Self: "r1"}
	e, err := NewEtcd(ok)
	require.NoError(t, err)
	assert.Equal(t, 10, e.ttl, "default TTL is 10 s (docs/design.md §8)")
	assert.Equal(t, DefaultEtcdPrefix, e.prefix)
	assert.Equal(t, Status{Self: "r1"}, e.Status())

	for _, tc := range []struct {
		name string
		mod  func(*EtcdConfig)
		want string
	}{
		{"no client", func(c *EtcdConfig) { c.Client = nil }, "etcd client is required"},
		{"no store", func(c *EtcdConfig) { c.Store = nil }, "store is required"},
		{"no self", func(c *EtcdConfig) { c.Self = " " }, "replica-id"},
		{"root prefix", func(c *EtcdConfig) { c.Prefix = "/" }, "election prefix"},
		{"ttl too short", func(c *EtcdConfig) { c.TTL = time.Second }, "election-ttl: must be between 2s and 5m0s, got 1s"},
		{"ttl too long", func(c *EtcdConfig) { c.TTL = 6 * time.Minute }, "election-ttl: must be between"},
		{"ttl fraction", func(c *EtcdConfig) { c.TTL = 2500 * time.Millisecond }, "election-ttl: must be a whole number of seconds"},
	} {
		c := ok
		tc.mod(&c)
		_, err := NewEtcd(c)
		assert.ErrorContains(t, err, tc.want, tc.name)
	}
	c := ok
	c.Prefix, c.TTL = "/x/y/", 2*time.Second
	e, err = NewEtcd(c)
	require.NoError(t, err)
	assert.Equal(t, "/x/y", e.prefix)
	assert.Equal(t, 2, e.ttl)
	c.TTL = MaxElectionTTL
	e, err = NewEtcd(c)
	require.NoError(t, err, "the longest TTL is allowed")
	assert.Equal(t, 300, e.ttl)

	err = e.Run(context.Background(), Callbacks{})
	assert.ErrorContains(t, err, "OnStartedLeading is required")
}

// Three replicas, one store: never more than one leads, and one does.
func TestEtcdAtMostOneLeader(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	eps := etcdtest.Start(t)
	admin := etcdtest.NewClient(t, eps)
	start := time.Now()
	var rs []*replica
	for _, id := range []string{"r1", "r2", "r3"} {
		rs = append(rs, startReplica(t, eps, st, id, fencedWork(st)))
	}

	var firstLeader time.Duration
	maxLeading := 0
	for time.Since(start) < 3*time.Second {
		n := len(leaders(rs))
		maxLeading = max(maxLeading, n)
		require.LessOrEqual(t, n, 1, "two replicas lead at %v", time.Since(start))
		if n == 1 && firstLeader == 0 {
			firstLeader = time.Since(start)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ls := leaders(rs)
	require.Len(t, ls, 1, "exactly one replica leads")
	l := ls[0]
	t.Logf("first leader %s after %v (from starting the replicas); sampled every 10 ms for 3 s, at most %d leading",
		l.id, firstLeader.Round(time.Millisecond), maxLeading)

	// The epoch is the leader key's create revision, and the fence holds it.
	val, rev := leaderKey(t, admin)
	assert.Equal(t, l.id, val)
	assert.Equal(t, rev, l.e.Status().Epoch)
	epoch, holder, err := st.Fence(context.Background())
	require.NoError(t, err)
	assert.Equal(t, rev, epoch)
	assert.Equal(t, l.id, holder)

	// Every replica observes the same leader.
	require.Eventually(t, func() bool {
		for _, r := range rs {
			if r.e.Status().Leader != l.id {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "all replicas observe %s as leader", l.id)
	for _, r := range rs {
		s := r.e.Status()
		assert.Equal(t, r.id, s.Self)
		assert.Equal(t, r == l, s.Leading)
		var want float64
		if r == l {
			want = 1
		}
		assert.Equal(t, want, testutil.ToFloat64(r.m.Leader), "vigil_leader of %s", r.id)
	}
	assert.Equal(t, float64(rev), testutil.ToFloat64(l.m.LeaderEpoch))
	assert.Equal(t, 1.0, testutil.ToFloat64(l.m.LeaderChanges))
}

// When the leader's session dies, another replica leads within TTL + 1 s.
func TestEtcdFailoverWhenLeaderSessionDies(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"lease revoked", "client closed"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			st := openStore(t)
			eps := etcdtest.Start(t)
			admin := etcdtest.NewClient(t, eps)
			var rs []*replica
			for _, id := range []string{"r1", "r2", "r3"} {
				rs = append(rs, startReplica(t, eps, st, id, fencedWork(st)))
			}
			old := waitLeader(t, rs, nil, 10*time.Second)
			oldEpoch := old.e.Status().Epoch
			settle(t, admin, 3)
			lease := old.e.leaseID()
			require.NotZero(t, lease)

			killed := time.Now()
			if how == "lease revoked" {
				_, err := admin.Revoke(context.Background(), lease)
				require.NoError(t, err)
			} else {
				require.NoError(t, old.cli.Close()) // like a crash: nothing revokes the lease
			}
			// Poll every millisecond for both events: another replica
			// leads, and the old leader knows it does not.
			var next *replica
			var failover, noticed time.Duration
			for (next == nil || noticed == 0) && time.Since(killed) < testTTL+time.Second {
				if next == nil {
					for _, l := range leaders(rs) {
						if l != old {
							next, failover = l, time.Since(killed)
						}
					}
				}
				if noticed == 0 && !old.e.Status().Leading {
					noticed = time.Since(killed)
				}
				time.Sleep(time.Millisecond)
			}
			require.NotNil(t, next, "no other replica leads within TTL + 1 s")
			require.NotZero(t, noticed, "the old leader still leads after TTL + 1 s")
			t.Logf("%s: %s took over from %s after %v (TTL %v); the old leader stopped leading after %v",
				how, next.id, old.id, failover.Round(time.Millisecond), testTTL, noticed.Round(time.Millisecond))
			assert.Less(t, failover, testTTL+time.Second)

			newEpoch := next.e.Status().Epoch
			assert.Greater(t, newEpoch, oldEpoch)
			val, rev := leaderKey(t, admin)
			assert.Equal(t, next.id, val)
			assert.Equal(t, rev, newEpoch)
			// The old leader stops either when its keepalive learns that the
			// lease is gone, or earlier, when its next write meets the new
			// leader's fence.
			select {
			case err := <-old.stopped:
				assert.True(t, err == nil || store.IsFenced(err),
					"the old leader's work stopped on its cancelled context or on the fence: %v", err)
			case <-time.After(5 * time.Second):
				t.Fatal("OnStoppedLeading was not called on the old leader")
			}
			assert.Equal(t, 0.0, testutil.ToFloat64(old.m.Leader))
			assert.Equal(t, 2.0, testutil.ToFloat64(old.m.LeaderChanges), "gain and loss")
			assert.Regexp(t, `reason=("lease lost"|fenced)`, old.logs.String())
			if how == "lease revoked" {
				// The old leader campaigns again, behind the new one.
				require.Eventually(t, func() bool { return old.e.leaseID() != 0 && old.e.leaseID() != lease },
					5*time.Second, 10*time.Millisecond)
				require.Eventually(t, func() bool { return old.e.Status().Leader == next.id }, 5*time.Second, 10*time.Millisecond)
				// Closing the ended session revoked the lease again: etcd
				// no longer knew it, and the failure is logged at debug.
				assert.Contains(t, old.logs.String(), revokeFailedLog)
			} else {
				// Its client closed, the old leader could not delete its
				// key; the key goes with the lease, within the TTL. The
				// resign runs after the work stopped and waits up to
				// etcdCallTimeout.
				resignFailed := regexp.MustCompile(`msg="etcd election: could not resign; the leader key goes when the lease expires" .* ttl=` + testTTL.String())
				require.Eventually(t, func() bool { return resignFailed.MatchString(old.logs.String()) },
					etcdCallTimeout+5*time.Second, 10*time.Millisecond, "%s", old.logs)
			}
			assert.Len(t, leaders(rs), 1)
		})
	}
}

// Resign (SIGTERM) hands leadership over in well under a second, and Run
// returns nil.
// revokeFailedLog is the debug line of a lease revoke etcd refused.
const revokeFailedLog = `msg="etcd election: revoke lease"`

func TestEtcdResignHandsOverFast(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	eps := etcdtest.Start(t)
	admin := etcdtest.NewClient(t, eps)
	var rs []*replica
	for _, id := range []string{"r1", "r2", "r3"} {
		rs = append(rs, startReplica(t, eps, st, id, fencedWork(st)))
	}
	old := waitLeader(t, rs, nil, 10*time.Second)
	oldEpoch := old.e.Status().Epoch
	settle(t, admin, 3)

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, old.e.Resign(ctx))
	resigned := time.Since(start)
	assert.False(t, old.e.Status().Leading, "Resign returns once the term has ended")
	assert.NotEqual(t, old.id, old.e.Status().Leader, "a replica that resigned no longer names itself leader")
	keys, err := admin.Get(ctx, DefaultEtcdPrefix+"/", clientv3.WithPrefix())
	require.NoError(t, err)
	for _, kv := range keys.Kvs {
		assert.NotEqual(t, old.id, string(kv.Value), "Resign returns once the key %s is gone", kv.Key)
	}
	next := waitLeader(t, rs, old, time.Second)
	handover := time.Since(start)
	t.Logf("Resign returned after %v; %s took over from %s after %v",
		resigned.Round(time.Microsecond), next.id, old.id, handover.Round(time.Microsecond))
	assert.Less(t, handover, time.Second)
	assert.False(t, old.e.Status().Leading)
	assert.Greater(t, next.e.Status().Epoch, oldEpoch)

	select {
	case err := <-old.done:
		assert.NoError(t, err, "Run returns nil after Resign")
		old.done <- err // for the cleanup
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Resign")
	}
	select {
	case err := <-old.stopped:
		assert.NoError(t, err)
	default:
		t.Error("OnStoppedLeading was not called")
	}
	assert.Contains(t, old.logs.String(), "reason=resigned")
	assert.Regexp(t, `msg=leading .* ttl=`+testTTL.String(), old.logs.String(), "the term's start names its TTL")
	assert.NotContains(t, old.logs.String(), "could not resign", "its resign succeeded")
	assert.NotContains(t, old.logs.String(), revokeFailedLog, "its lease's revoke succeeded")
	// It no longer campaigns: its keys are gone, and a new Run is a no-op.
	resp, err := admin.Get(context.Background(), DefaultEtcdPrefix+"/", clientv3.WithPrefix())
	require.NoError(t, err)
	for _, kv := range resp.Kvs {
		assert.NotEqual(t, old.id, string(kv.Value), "key %s", kv.Key)
	}
	assert.Len(t, resp.Kvs, 2)
	assert.NoError(t, old.e.Run(context.Background(), Callbacks{OnStartedLeading: fencedWork(st)}))
	assert.NoError(t, old.e.Resign(ctx), "Resign twice is harmless")
}

// Split brain: the old leader is paused past its lease while a new leader
// takes the fence. When it wakes up, none of its writes land.
func TestEtcdDeposedLeaderCannotWrite(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	eps := etcdtest.Start(t)
	admin := etcdtest.NewClient(t, eps)
	ctx := context.Background()

	// A: a few good writes, then a "SIGSTOP" that ignores ctx, then writes
	// with a context that is never cancelled (the process did not notice).
	aWrote, pause := make(chan struct{}), make(chan struct{})
	var aErrs []error
	a := startReplica(t, eps, st, "A", func(ctx context.Context, term Term) error {
		for range 3 {
			if _, err := st.StartQueuedRuns(ctx, term.Epoch); err != nil {
				return err
			}
		}
		close(aWrote)
		<-pause
		wctx := context.WithoutCancel(ctx)
		for range 5 {
			_, err := st.StartQueuedRuns(wctx, term.Epoch)
			aErrs = append(aErrs, err)
		}
		return errors.Join(aErrs...)
	})
	t.Cleanup(func() {
		select {
		case <-pause:
		default:
			close(pause)
		}
	})
	waitLeader(t, []*replica{a}, nil, 10*time.Second)
	eA := a.e.Status().Epoch
	val, rev := leaderKey(t, admin)
	require.Equal(t, "A", val)
	require.Equal(t, rev, eA, "A's epoch is its leader key's create revision")
	<-aWrote

	// B: writes whenever enabled; the test turns it off to watch A alone.
	var bMu sync.Mutex
	bEnabled := true
	var bWrites atomic.Int64
	b := startReplica(t, eps, st, "B", func(ctx context.Context, term Term) error {
		for {
			bMu.Lock()
			if bEnabled {
				if _, err := st.StartQueuedRuns(ctx, term.Epoch); err != nil {
					bMu.Unlock()
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				bWrites.Add(1)
			}
			bMu.Unlock()
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	require.Eventually(t, func() bool { return b.e.leaseID() != 0 }, 5*time.Second, time.Millisecond)

	revoked := time.Now()
	_, err := admin.Revoke(ctx, a.e.leaseID())
	require.NoError(t, err)
	waitLeader(t, []*replica{a, b}, a, testTTL+time.Second)
	eB := b.e.Status().Epoch
	val, rev = leaderKey(t, admin)
	require.Equal(t, "B", val)
	require.Equal(t, rev, eB, "B's epoch is its leader key's create revision")
	require.Greater(t, eB, eA)
	require.Eventually(t, func() bool { return bWrites.Load() >= 3 }, 5*time.Second, 10*time.Millisecond, "B's writes succeed")
	fence, holder, err := st.Fence(ctx)
	require.NoError(t, err)
	require.Equal(t, eB, fence)
	require.Equal(t, "B", holder)
	require.Eventually(t, func() bool { return !a.e.Status().Leading }, testTTL, time.Millisecond,
		"A's elector notices the lost lease even though its work is paused")
	noticed := time.Now()
	t.Logf("A's elector noticed the revoked lease after %v", noticed.Sub(revoked).Round(time.Millisecond))

	// Only A's epoch may now touch runs: B stops writing, a run is queued.
	bMu.Lock()
	bEnabled = false
	bMu.Unlock()
	spec, err := dag.Parse([]byte("dag_id: d\ntasks:\n  - id: a\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	run, err := st.TriggerRun(ctx, "d")
	require.NoError(t, err)

	// A stays paused for longer than the TTL past the end of its term,
	// then wakes up.
	time.Sleep(time.Until(noticed.Add(testTTL + 200*time.Millisecond)))
	close(pause)
	var stoppedErr error
	select {
	case stoppedErr = <-a.stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("A's work did not return after it woke up")
	}
	require.Len(t, aErrs, 5)
	for i, err := range aErrs {
		var fenced *store.FencedError
		require.ErrorAs(t, err, &fenced, "write %d of A", i)
		assert.Equal(t, eA, fenced.Ours)
		assert.Equal(t, eB, fenced.Current)
		assert.Equal(t, "B", fenced.Holder)
	}
	assert.True(t, store.IsFenced(stoppedErr), "OnStoppedLeading gets the fenced error: %v", stoppedErr)
	d, err := st.GetRun(ctx, run.ID)
	require.NoError(t, err)
	assert.EqualValues(t, "queued", d.State, "no write of the deposed epoch landed")
	assert.Contains(t, a.logs.String(), fmt.Sprintf("fenced: stopping leadership, our epoch %d, fence epoch %d", eA, eB))
	assert.Contains(t, a.logs.String(), "leader work ignores the end of its term")

	// B, still leading, starts the run.
	assert.True(t, b.e.Status().Leading)
	assert.False(t, a.e.Status().Leading)
	bMu.Lock()
	bEnabled = true
	bMu.Unlock()
	require.Eventually(t, func() bool {
		d, err := st.GetRun(ctx, run.ID)
		return err == nil && d.State == "running"
	}, 5*time.Second, 10*time.Millisecond, "B's writes land")
	// A campaigns again, as a follower of B.
	require.Eventually(t, func() bool { return a.e.Status().Leader == "B" }, 5*time.Second, 10*time.Millisecond)
	assert.Len(t, leaders([]*replica{a, b}), 1)
}

// etcd #19597: Campaign can return after the session's lease is gone.
// verifyOwnership must then report that we do not lead.
func TestVerifyOwnership(t *testing.T) {
	t.Parallel()
	eps := etcdtest.Start(t)
	cli := etcdtest.NewClient(t, eps)
	admin := etcdtest.NewClient(t, eps)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("expired session", func(t *testing.T) {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(2))
		require.NoError(t, err)
		defer s.Close()
		el := concurrency.NewElection(s, "/expired")
		require.NoError(t, el.Campaign(ctx, "me"))
		require.NoError(t, verifyOwnership(ctx, s, el), "a live leader owns its key")

		_, err = admin.Revoke(ctx, s.Lease())
		require.NoError(t, err)
		select {
		case <-s.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("session.Done() did not close after its lease was revoked")
		}
		err = verifyOwnership(ctx, s, el)
		require.ErrorIs(t, err, errNotLeader)
		t.Logf("reported: %v", err)
	})

	// The real #19597 sequence: B's campaign waits behind A; B's lease is
	// revoked (its key deleted) while it waits; A resigns; B's Campaign
	// returns nil although B holds no key. B's TTL is long, so its
	// keepalive (every TTL/3) has not noticed yet and session.Done() is
	// still open: only the leader-key check catches it.
	t.Run("campaign returns after the lease is gone", func(t *testing.T) {
		sa, err := concurrency.NewSession(cli, concurrency.WithTTL(60))
		require.NoError(t, err)
		defer sa.Close()
		ea := concurrency.NewElection(sa, "/19597")
		require.NoError(t, ea.Campaign(ctx, "a"))

		sb, err := concurrency.NewSession(cli, concurrency.WithTTL(60))
		require.NoError(t, err)
		defer sb.Close()
		eb := concurrency.NewElection(sb, "/19597")
		campaigned := make(chan error, 1)
		go func() { campaigned <- eb.Campaign(ctx, "b") }()
		require.Eventually(t, func() bool {
			resp, err := admin.Get(ctx, "/19597/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			return err == nil && resp.Count == 2
		}, 5*time.Second, 5*time.Millisecond, "B's key is waiting behind A's")
		_, err = admin.Revoke(ctx, sb.Lease())
		require.NoError(t, err)
		require.NoError(t, ea.Resign(ctx))
		select {
		case err := <-campaigned:
			require.NoError(t, err, "Campaign returns nil: the bug being guarded against")
		case <-time.After(5 * time.Second):
			t.Fatal("B's Campaign did not return")
		}
		sessionDone := isClosed(sb.Done())
		err = verifyOwnership(ctx, sb, eb)
		require.ErrorIs(t, err, errNotLeader)
		t.Logf("session.Done() closed: %v; reported: %v", sessionDone, err)
		assert.False(t, sessionDone, "the check did not rely on session.Done()")

		// Another candidate then leads, and its own check passes.
		sc, err := concurrency.NewSession(cli, concurrency.WithTTL(60))
		require.NoError(t, err)
		defer sc.Close()
		ec := concurrency.NewElection(sc, "/19597")
		require.NoError(t, ec.Campaign(ctx, "c"))
		require.NoError(t, verifyOwnership(ctx, sc, ec))
		require.ErrorIs(t, verifyOwnership(ctx, sb, eb), errNotLeader)
	})
}

// Two Runs of one elector at once are refused.
func TestEtcdRunTwiceIsRefused(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	eps := etcdtest.Start(t)
	r := startReplica(t, eps, st, "solo", fencedWork(st))
	waitLeader(t, []*replica{r}, nil, 10*time.Second)
	err := r.e.Run(context.Background(), Callbacks{OnStartedLeading: fencedWork(st)})
	assert.ErrorContains(t, err, "already running")
	assert.Equal(t, "solo", r.e.Status().Leader)
}

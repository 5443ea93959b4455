package leader

// Both electors keep retrying store.AcquireFence while an older term's
// leader transaction still holds the fence row (adr/0010), against a real
// etcd and PostgreSQL.

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/internal/testlog"
	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// fenceRetryLog is what takeFence logs for each lock-timeout retry.
const fenceRetryLog = "leader fence still locked by an older term's transaction"

// openShortLockStore opens a store whose leader sessions give up a lock
// wait after 200ms, and keep an idle transaction for 5s (the tests end the
// old transaction themselves).
func openShortLockStore(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.OpenWithOptions(context.Background(), url, store.Options{
		LeaderTimeouts: store.LeaderTimeouts{Lock: 200 * time.Millisecond, IdleInTransaction: 5 * time.Second},
	})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// holdFence opens a leader transaction of the fence's current epoch (an
// older term's, frozen) on its own store and returns a func that ends it.
func holdFence(t *testing.T, url string, epoch int64) (release func()) {
	t.Helper()
	old := openShortLockStore(t, url)
	started, rel, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- old.LeaderTx(context.Background(), epoch, func(store.Tx) error {
			close(started)
			<-rel
			return nil
		})
	}()
	<-started
	var released bool
	release = func() {
		if !released {
			released = true
			close(rel)
			require.NoError(t, <-done)
		}
	}
	t.Cleanup(release)
	return release
}

// waitLogCount waits until logs holds want at least n times.
func waitLogCount(t *testing.T, logs *testlog.Buffer, want string, n int, timeout time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Count(logs.String(), want) >= n },
		timeout, 10*time.Millisecond, "%d× %q in the log:\n%s", n, want, logs.String())
}

// retrySteps returns the attempt and backoff of the first n retry lines
// of a text-handler log.
func retrySteps(log string, n int) []string {
	var steps []string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, fenceRetryLog) || len(steps) == n {
			continue
		}
		i := strings.Index(line, " attempt=")
		j := strings.Index(line, " err=")
		if i < 0 || j < i {
			steps = append(steps, line)
			continue
		}
		steps = append(steps, line[i+1:j])
	}
	return steps
}

func TestEtcdRetriesFenceBehindHeldLeaderTx(t *testing.T) {
	t.Parallel()
	url := storetest.DB(t)
	st := openShortLockStore(t, url)
	release := holdFence(t, url, 0) // the fence's initial epoch
	eps := etcdtest.Start(t)

	r := startReplica(t, eps, st, "r1", fencedWork(st))
	waitLogCount(t, r.logs, fenceRetryLog, 3, 15*time.Second)
	assert.False(t, r.e.Status().Leading, "no term before the fence is taken")
	_, rev := leaderKey(t, etcdtest.NewClient(t, eps))

	release()
	waitLeader(t, []*replica{r}, nil, 10*time.Second)
	assert.Equal(t, rev, r.e.Status().Epoch, "the same candidacy took the fence: no new campaign")
	epoch, holder, err := st.Fence(context.Background())
	require.NoError(t, err)
	assert.Equal(t, rev, epoch)
	assert.Equal(t, "r1", holder)
	assert.NotContains(t, r.logs.String(), "campaigning again", "lock timeouts are retried in place")
}

func TestStaticRetriesFenceBehindHeldLeaderTx(t *testing.T) {
	t.Parallel()
	url := storetest.DB(t)
	st := openShortLockStore(t, url)
	release := holdFence(t, url, 0)

	logs := &testlog.Buffer{}
	s := NewStatic(st, "lite", slog.New(slog.NewTextHandler(logs, nil)), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, Callbacks{OnStartedLeading: leaderWork(st)}) }()
	defer func() {
		cancel()
		assert.NoError(t, <-done)
	}()
	waitLogCount(t, logs, fenceRetryLog, 3, 15*time.Second)
	assert.False(t, s.Status().Leading)
	assert.Equal(t, []string{"attempt=1 backoff=100ms", "attempt=2 backoff=200ms", "attempt=3 backoff=400ms"},
		retrySteps(logs.String(), 3), "each retry counts up and doubles its backoff (from minFenceRetry)")

	release()
	require.Eventually(t, func() bool { return s.Status().Leading }, 10*time.Second, 10*time.Millisecond)
	epoch, holder, err := st.Fence(context.Background())
	require.NoError(t, err)
	assert.Equal(t, s.Status().Epoch, epoch)
	assert.Equal(t, int64(1), epoch, "the first epoch drawn was kept through the retries")
	assert.Equal(t, "lite", holder)
}

package store_test

// Tests of the bounded leader sessions (adr/0010-bounded-leader-waits.md)
// against a real PostgreSQL. Each "replica" is its own Store on the same
// database, as two processes would be.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/internal/testhook"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

func openWith(t *testing.T, url string, opts store.Options) *store.Store {
	t.Helper()
	st, err := store.OpenWithOptions(context.Background(), url, opts)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

func TestDefaultLeaderTimeouts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ttl  time.Duration
		want store.LeaderTimeouts
	}{
		{0, store.LeaderTimeouts{Lock: 2500 * time.Millisecond, Statement: 30 * time.Second, IdleInTransaction: 5 * time.Second}},
		{10 * time.Second, store.LeaderTimeouts{Lock: 2500 * time.Millisecond, Statement: 30 * time.Second, IdleInTransaction: 5 * time.Second}},
		{2 * time.Second, store.LeaderTimeouts{Lock: 500 * time.Millisecond, Statement: 30 * time.Second, IdleInTransaction: time.Second}},
		{3 * time.Second, store.LeaderTimeouts{Lock: 750 * time.Millisecond, Statement: 30 * time.Second, IdleInTransaction: 1500 * time.Millisecond}},
		{time.Minute, store.LeaderTimeouts{Lock: 5 * time.Second, Statement: 30 * time.Second, IdleInTransaction: 30 * time.Second}},
	} {
		got := store.DefaultLeaderTimeouts(c.ttl)
		assert.Equal(t, c.want, got, "TTL %s", c.ttl)
		resolved, err := store.LeaderTimeouts{}.Resolve(c.ttl)
		assert.NoError(t, err, "TTL %s", c.ttl)
		assert.Equal(t, got, resolved, "TTL %s", c.ttl)
	}
	// Explicit fields stay; zero ones are derived.
	got, err := store.LeaderTimeouts{Lock: time.Second}.Resolve(4 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, store.LeaderTimeouts{Lock: time.Second, Statement: 30 * time.Second, IdleInTransaction: 2 * time.Second}, got)
}

func TestLeaderTimeoutsValidate(t *testing.T) {
	t.Parallel()
	ttl := 10 * time.Second
	for _, c := range []struct {
		in   store.LeaderTimeouts
		want []string
	}{
		{store.LeaderTimeouts{IdleInTransaction: 10 * time.Second},
			[]string{"leader-idle-timeout: 10s must be < the election TTL 10s (10s ≥ 10s)", "TTL/2 = 5s"}},
		{store.LeaderTimeouts{IdleInTransaction: -time.Second}, []string{"leader-idle-timeout: -1s must be positive"}},
		{store.LeaderTimeouts{Lock: 12 * time.Second, Statement: time.Minute},
			[]string{"leader-lock-timeout: 12s must be < the election TTL 10s (12s ≥ 10s)"}},
		{store.LeaderTimeouts{Lock: -time.Second}, []string{"leader-lock-timeout: -1s must be positive"}},
		{store.LeaderTimeouts{Lock: 3 * time.Second, Statement: 3 * time.Second},
			[]string{"leader-statement-timeout: 3s must be > leader-lock-timeout 3s (3s ≤ 3s)"}},
		{store.LeaderTimeouts{Statement: 2 * time.Hour}, []string{"leader-statement-timeout: 2h0m0s must be ≤ 1h0m0s"}},
		{store.LeaderTimeouts{Lock: 11 * time.Second, Statement: time.Minute, IdleInTransaction: 11 * time.Second},
			[]string{"leader-lock-timeout: 11s", "leader-idle-timeout: 11s"}},
	} {
		_, err := c.in.Resolve(ttl)
		require.Error(t, err, "%+v", c.in)
		for _, w := range c.want {
			assert.Contains(t, err.Error(), w)
		}
	}
	_, err := store.OpenWithOptions(context.Background(), "postgres://127.0.0.1:1/none",
		store.Options{ElectionTTL: 3 * time.Second, LeaderTimeouts: store.LeaderTimeouts{IdleInTransaction: 3 * time.Second}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "leader-idle-timeout", "Open refuses bad timeouts before connecting")
}

// The leader pool's sessions carry the timeouts; the main pool's do not.
func TestLeaderSessionsCarryTimeouts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lt := store.LeaderTimeouts{Lock: 700 * time.Millisecond, Statement: 9 * time.Second, IdleInTransaction: 1500 * time.Millisecond}
	st := openWith(t, storetest.DB(t), store.Options{ElectionTTL: 3 * time.Second, LeaderTimeouts: lt})
	assert.Equal(t, lt, st.LeaderTimeouts())
	require.NoError(t, st.AcquireFence(ctx, 1, "r1"))
	var lock, stmt, idle, app string
	require.NoError(t, st.LeaderTx(ctx, 1, func(tx store.Tx) error {
		return tx.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout'),
			current_setting('idle_in_transaction_session_timeout'), current_setting('application_name')`).Scan(&lock, &stmt, &idle, &app)
	}))
	assert.Equal(t, []string{"700ms", "9s", "1500ms", "vigil-leader"}, []string{lock, stmt, idle, app})

	conn, err := pgx.Connect(ctx, st.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('lock_timeout')`).Scan(&lock))
	assert.Equal(t, "0", lock, "other sessions are unaffected")
}

// holdLeaderTx runs a LeaderTx of epoch on st whose callback signals
// started, then blocks until release is closed and then tries a write; it
// returns the channel LeaderTx's error arrives on.
func holdLeaderTx(t *testing.T, st *store.Store, epoch int64) (started <-chan struct{}, release func(), done <-chan error) {
	t.Helper()
	begun, gate := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(gate) })
	// A test that fails while the transaction is held must still end it,
	// or closing the store waits for its connection forever.
	t.Cleanup(release)
	out := make(chan error, 1)
	go func() {
		out <- st.LeaderTx(context.Background(), epoch, func(tx store.Tx) error {
			close(begun)
			<-gate
			_, err := tx.Exec(context.Background(),
				`INSERT INTO settings (name, value) VALUES ('test.old_leader_write', 'x')`)
			return err
		})
	}()
	return begun, release, out
}

func settingExists(t *testing.T, st *store.Store, name string) bool {
	t.Helper()
	kv, err := st.Settings(context.Background())
	require.NoError(t, err)
	_, ok := kv[name]
	return ok
}

// A leader transaction held open (a frozen leader) no longer blocks a new
// leader's AcquireFence without bound: it fails after lock_timeout with an
// error IsLockTimeout reports, and succeeds once the old one is gone.
func TestAcquireFenceFailsFastBehindHeldLeaderTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.DB(t)
	lt := store.LeaderTimeouts{Lock: 300 * time.Millisecond, IdleInTransaction: 5 * time.Second}
	old := openWith(t, url, store.Options{LeaderTimeouts: lt})
	next := openWith(t, url, store.Options{LeaderTimeouts: lt})
	require.NoError(t, old.AcquireFence(ctx, 10, "old"))

	started, release, done := holdLeaderTx(t, old, 10)
	<-started
	began := time.Now()
	err := next.AcquireFence(ctx, 11, "new")
	waited := time.Since(began)
	require.Error(t, err, "a new leader took the fence while an older term's leader transaction was open: "+
		"the fence check does not keep the fence row locked")
	assert.True(t, store.IsLockTimeout(err), "got %v", err)
	assert.False(t, store.IsFenced(err))
	assert.Contains(t, err.Error(), "lock_timeout 300ms")
	assert.GreaterOrEqual(t, waited, 250*time.Millisecond, "it waited for the lock first")
	assert.Less(t, waited, 2*time.Second, "it gave up after about lock_timeout")
	epoch, holder, err := next.Fence(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(10), epoch)
	assert.Equal(t, "old", holder)

	// The old transaction commits (it still holds epoch 10); then the new
	// leader takes the fence and the old epoch is refused.
	release()
	require.NoError(t, <-done)
	require.NoError(t, next.AcquireFence(ctx, 11, "new"))
	err = old.LeaderTx(ctx, 10, func(store.Tx) error { t.Error("fenced work ran"); return nil })
	assert.True(t, store.IsFenced(err), "got %v", err)
	assert.False(t, store.IsLockTimeout(err))
}

// A leader session idle inside its transaction is terminated after the
// idle timeout, which releases the fence: a waiting AcquireFence then
// wins, and the old transaction's later write fails and never lands.
func TestIdleLeaderSessionTerminated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.DB(t)
	lt := store.LeaderTimeouts{Lock: 1500 * time.Millisecond, IdleInTransaction: 500 * time.Millisecond}
	old := openWith(t, url, store.Options{ElectionTTL: 2 * time.Second, LeaderTimeouts: lt})
	next := openWith(t, url, store.Options{ElectionTTL: 2 * time.Second, LeaderTimeouts: lt})
	require.NoError(t, old.AcquireFence(ctx, 20, "old"))

	started, release, done := holdLeaderTx(t, old, 20)
	<-started
	began := time.Now()
	require.NoError(t, next.AcquireFence(ctx, 21, "new"), "the idle old session was ended within lock_timeout")
	waited := time.Since(began)
	assert.Less(t, waited, lt.Lock, "AcquireFence won once the idle session ended")
	t.Logf("AcquireFence won after %s (idle timeout %s)", waited.Round(time.Millisecond), lt.IdleInTransaction)

	release()
	err := <-done
	require.Error(t, err, "the old transaction's session is gone")
	assert.False(t, settingExists(t, next, "test.old_leader_write"), "the deposed write did not land")
	epoch, holder, err := next.Fence(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(21), epoch)
	assert.Equal(t, "new", holder)
	// The old store's pool replaced the dead connection: its next leader
	// transaction runs, and is fenced.
	err = old.LeaderTx(ctx, 20, func(store.Tx) error { return nil })
	assert.True(t, store.IsFenced(err), "got %v", err)
}

// The HoldLeaderTx signal of the e2e build (testhook.HoldLeaderTx) holds
// the first fenced LeaderTx open after writing its marker, then tries its
// deposed write in the same transaction; with the idle timeout, the write
// fails.
func TestTestHookHoldLeaderTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.DB(t)
	marker := filepath.Join(t.TempDir(), "held")
	lt := store.LeaderTimeouts{IdleInTransaction: 500 * time.Millisecond}
	old := openWith(t, url, store.Options{ElectionTTL: 2 * time.Second, LeaderTimeouts: lt,
		TestSignals: store.TestSignals{HoldLeaderTx: testhook.HoldLeaderTx(marker)}})
	next := openWith(t, url, store.Options{ElectionTTL: 2 * time.Second})
	require.NoError(t, old.AcquireFence(ctx, 30, "old"))

	// A fenced-out LeaderTx does not use up the hook.
	err := old.LeaderTx(ctx, 29, func(store.Tx) error { return nil })
	require.True(t, store.IsFenced(err), "got %v", err)
	_, statErr := os.Stat(marker)
	require.True(t, os.IsNotExist(statErr), "no marker after a fenced LeaderTx")

	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ran := false
	done := make(chan error, 1)
	go func() { done <- old.LeaderTx(lctx, 30, func(store.Tx) error { ran = true; return nil }) }()
	require.Eventually(t, func() bool { _, err := os.Stat(marker); return err == nil }, 10*time.Second, 10*time.Millisecond)
	b, err := os.ReadFile(marker)
	require.NoError(t, err)
	assert.Contains(t, string(b), "epoch 30")
	// The held session ends after its idle timeout; until then the new
	// term's AcquireFence gives up after its lock_timeout, and retries as
	// the electors do (the two timeouts are alike here, so which ends
	// first is up to PostgreSQL's timers on a loaded machine).
	var acqErr error
	for deadline := time.Now().Add(10 * time.Second); ; {
		acqErr = next.AcquireFence(ctx, 31, "new")
		if !store.IsLockTimeout(acqErr) || time.Now().After(deadline) {
			break
		}
	}
	require.NoError(t, acqErr, "the held session ended after the idle timeout")

	cancel() // the leadership's end does not release the hold: the test does
	require.NoError(t, os.WriteFile(marker+".release", nil, 0o600))
	err = <-done
	require.Error(t, err)
	assert.Contains(t, err.Error(), "test hook: deposed write")
	assert.False(t, ran, "the hook replaces the callback")
	res, err := os.ReadFile(marker + ".result")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(res), "failed: "), "result %q", res)
	assert.False(t, settingExists(t, next, testhook.DeposedWriteSetting))

	// Once per hook (the e2e build shares one per process): the next
	// LeaderTx runs normally.
	require.NoError(t, next.LeaderTx(ctx, 31, func(store.Tx) error { return nil }))
	require.NoError(t, old.AcquireFence(ctx, 32, "old-again"))
	require.NoError(t, old.LeaderTx(ctx, 32, func(store.Tx) error { ran = true; return nil }))
	assert.True(t, ran)
}

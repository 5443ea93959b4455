package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/internal/testlog"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), storetest.DB(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st
}

// leaderWork writes through the fence every 20 ms until fenced or stopped,
// like the scheduler does.
func leaderWork(st *store.Store) func(ctx context.Context, term Term) error {
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

// A second Lite process against the same database takes a newer epoch;
// the first notices at its next write, stops leading and says so.
func TestSecondLiteProcessFencesOutTheFirst(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	logs1 := &testlog.Buffer{}
	m1 := metrics.New()
	first := NewStatic(st, "first", slog.New(slog.NewTextHandler(logs1, nil)), m1)
	done1 := make(chan error, 1)
	go func() { done1 <- first.Run(ctx, Callbacks{OnStartedLeading: leaderWork(st)}) }()
	require.Eventually(t, func() bool { return first.Status().Leading }, 10*time.Second, 10*time.Millisecond)
	firstEpoch := first.Status().Epoch

	second := NewStatic(st, "second", nil, nil)
	ctx2, cancel2 := context.WithCancel(ctx)
	done2 := make(chan error, 1)
	go func() { done2 <- second.Run(ctx2, Callbacks{OnStartedLeading: leaderWork(st)}) }()
	require.Eventually(t, func() bool { return second.Status().Leading }, 10*time.Second, 10*time.Millisecond)
	assert.Greater(t, second.Status().Epoch, firstEpoch)

	require.Eventually(t, func() bool { return !first.Status().Leading }, 10*time.Second, 10*time.Millisecond,
		"the first process must notice it was fenced out")
	assert.Equal(t, "second", first.Status().Leader)
	assert.Contains(t, logs1.String(), "another Vigil process took over scheduling")
	assert.Contains(t, logs1.String(), "new_leader=second")

	// It does not campaign back (no ping-pong; afterTerm parks it, see
	// TestAfterTermParksWhenAnotherProcessHoldsTheFence): the second keeps
	// leading, and the first led one term only (checked after its Run
	// returned, below).
	assert.True(t, second.Status().Leading)
	assert.False(t, first.Status().Leading)

	// Nothing the first epoch writes lands any more. (The second stops its
	// loop first so that only the deposed epoch could touch the run.)
	cancel2()
	assert.NoError(t, <-done2)
	spec, err := dag.Parse([]byte("dag_id: d\ntasks:\n  - id: a\n    command: [\"true\"]\n"))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	run, err := st.TriggerRun(ctx, "d")
	require.NoError(t, err)
	_, err = st.StartQueuedRuns(ctx, firstEpoch)
	require.True(t, store.IsFenced(err), "got %v", err)
	d, err := st.GetRun(ctx, run.ID)
	require.NoError(t, err)
	assert.EqualValues(t, "queued", d.State, "the deposed epoch's write did not land")

	cancel()
	assert.NoError(t, <-done1)
	assert.Equal(t, 1, strings.Count(logs1.String(), "msg=leading "),
		"the first process led once and never campaigned back, not even once the second had stopped:\n%s", logs1.String())
}

// TestAfterTermParksWhenAnotherProcessHoldsTheFence pins the static
// elector's decision after a term: a fence another process holds parks
// it for good (whether or not Run's context has ended), an operator's
// reset (no holder) makes it take a new epoch unless it is stopping, and
// any other failure ends Run with the error.
func TestAfterTermParksWhenAnotherProcessHoldsTheFence(t *testing.T) {
	taken := fmt.Errorf("write: %w", &store.FencedError{Ours: 1, Current: 2, Holder: "second"})
	reset := &store.FencedError{Ours: 1, Current: 0}
	for _, c := range []struct {
		err     error
		ctxDone bool
		want    termEnd
	}{
		{taken, false, termPark},
		{taken, true, termPark},
		{reset, false, termRetake},
		{reset, true, termPark},
		{errors.New("boom"), false, termFailed},
		{errors.New("boom"), true, termDone},
		{nil, true, termDone},
		{nil, false, termDone},
	} {
		assert.Equal(t, c.want, afterTerm(c.err, c.ctxDone), "err %v, ctx done %v", c.err, c.ctxDone)
	}
}

// FOR SHARE on the fence row makes a newer AcquireFence wait for an open
// leader transaction, so a deposed leader's in-flight write either commits
// before the epoch moves or is refused after: never interleaved.
func TestAcquireFenceWaitsForOpenLeaderTransaction(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	require.NoError(t, st.AcquireFence(ctx, 10, "old"))

	inTx := make(chan struct{})
	release := make(chan struct{})
	txDone := make(chan time.Time, 1)
	go func() {
		err := st.LeaderTx(ctx, 10, func(_ store.Tx) error {
			close(inTx)
			<-release
			return nil
		})
		assert.NoError(t, err)
		txDone <- time.Now()
	}()
	<-inTx
	acquired := make(chan time.Time, 1)
	go func() {
		assert.NoError(t, st.AcquireFence(ctx, 11, "new"))
		acquired <- time.Now()
	}()
	select {
	case <-acquired:
		t.Fatal("AcquireFence did not wait for the open leader transaction")
	case <-time.After(300 * time.Millisecond):
	}
	releasedAt := time.Now()
	close(release)
	<-txDone
	at := <-acquired
	assert.False(t, at.Before(releasedAt), "the new epoch was taken only after the old transaction ended")

	err := st.LeaderTx(ctx, 10, func(store.Tx) error { t.Fatal("fenced work ran"); return nil })
	var fenced *store.FencedError
	require.ErrorAs(t, err, &fenced)
	assert.Equal(t, int64(10), fenced.Ours)
	assert.Equal(t, int64(11), fenced.Current)
	assert.Equal(t, "new", fenced.Holder)

	// An older or equal epoch can never take the fence back.
	require.True(t, store.IsFenced(st.AcquireFence(ctx, 11, "again")))
	require.True(t, store.IsFenced(st.AcquireFence(ctx, 5, "older")))
}

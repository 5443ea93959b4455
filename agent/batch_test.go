package agent

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// TestCompletionsEndingDuringABatchTravelTogether: while a batch is held
// in flight, the completions of two more tasks queue behind it and go in
// one request; until the server answers, their slots stay taken.
func TestCompletionsEndingDuringABatchTravelTogether(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	hold := make(chan struct{})
	f.holdBatch = hold
	f.interval = 2 * time.Minute // with reqTimeout below: the held batch never times out
	srv := f.serve()
	var release sync.Once
	// Before the server's own cleanup (LIFO): a test that fails while the
	// batch is held must not leave its handler, and so the server's Close,
	// waiting forever.
	t.Cleanup(func() { release.Do(func() { close(hold) }) })
	// The held batch is held for as long as the test takes to get its
	// waiters to end; were the agent's request to time out meanwhile, it
	// would send the held completion again with theirs and no queue of
	// two would ever be seen. With the test's usual 5 s timeout, 30 copies
	// at once on 2 cores failed so (and a 1 ms timeout always does). The
	// timeout is also bounded by the interval the server announces: before
	// the fake announced 2 minutes, the 15 s it announced capped this one,
	// and CI (every package's tests at once on 2 cores) saw a waiter end
	// only after the held request had timed out.
	a := startAgent(t, []string{srv.URL}, func(c *Config) { c.Capacity = 3 }, func(a *Agent) { a.reqTimeout = 2 * time.Minute })
	gate := filepath.Join(t.TempDir(), "gate")
	first := f.enqueue(0, nil, "true")
	waiters := []protocol.ClaimedTask{
		f.enqueue(0, map[string]string{"GATE": gate}, sh(`while [ ! -e "$GATE" ]; do sleep 0.01; done`)...),
		f.enqueue(0, map[string]string{"GATE": gate}, sh(`while [ ! -e "$GATE" ]; do sleep 0.01; done`)...),
	}
	queued := func(n int) func() bool {
		return func() bool {
			a.batchMu.Lock()
			defer a.batchMu.Unlock()
			return len(a.batch) == n
		}
	}
	// The first completion is in flight (held), none queued behind it.
	require.Eventually(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.reporting) == 1 && len(a.attempts) == 2
	}, 30*time.Second, 5*time.Millisecond, "the first task ended and its completion is in flight")
	require.Equal(t, 2*time.Minute, a.timeout(), "the held request outlasts any wait below")
	require.NoError(t, os.WriteFile(gate, nil, 0o644))
	require.Eventually(t, queued(2), 90*time.Second, 5*time.Millisecond, "both waiters' completions queue behind the held batch")
	a.mu.Lock()
	assert.Equal(t, 0, a.cfg.Capacity-len(a.attempts)-len(a.reporting), "no slot is free before the server answers")
	a.mu.Unlock()
	release.Do(func() { close(hold) })
	for _, task := range append(waiters, first) {
		c := f.waitCompletion(task.AttemptID, 30*time.Second)
		assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, []int{1, 2}, f.batches, "the held one, then the two that ended meanwhile")
	for _, task := range append(waiters, first) {
		assert.Equal(t, 1, f.completeHit[task.AttemptID], "each completion sent once")
	}
}

// TestCompletionsFallBackToTheSingleRoute: against a server without the
// batch route, the agent sends each completion on the single route.
func TestCompletionsFallBackToTheSingleRoute(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.noBatches = true
	srv := f.serve()
	a := startAgent(t, []string{srv.URL}, nil)
	for range 2 {
		task := f.enqueue(0, nil, "true")
		c := f.waitCompletion(task.AttemptID, 5*time.Second)
		assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	}
	assert.True(t, a.noBatch.Load(), "the agent stopped trying the batch route")
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Empty(t, f.batches)
}

// Found by the chaos suite (docs/reliability.md, seed 1124): PostgreSQL
// restarted while a replica applied a batch of completions; the item came
// back in a 200 reply with code internal, and the agent dropped it as a
// rejection, so a success was lost. An internal error of one item is
// transient, like a 5xx on the single route: the completion is replayed.
func TestACompletionFailedInternallyInABatchIsReplayed(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.failNext = 1
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	task := f.enqueue(0, nil, "true")
	c := f.waitCompletion(task.AttemptID, 10*time.Second)
	assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, 2, f.completeHit[task.AttemptID], "refused once with internal, then delivered")
}

// TestNextBatchBoundsOutputs: a batch takes the first item's generation
// only, at most MaxCompletionBatch items, and stops adding items whose
// outputs would pass maxBatchOutputBytes, so a request of completions
// with large outputs stays far below the server's body limit; the first
// item always goes, and the rest keep their order.
func TestNextBatchBoundsOutputs(t *testing.T) {
	t.Parallel()
	item := func(gen uint64, outBytes int) *batchItem {
		it := &batchItem{conn: conn{gen: gen}}
		if outBytes > 0 {
			it.pc.req.Outputs = map[string]string{"k": strings.Repeat("v", outBytes-1)}
		}
		return it
	}
	const big = 64 << 10
	var q []*batchItem
	for range 70 {
		q = append(q, item(1, big))
	}
	other, small := item(2, 0), item(1, 10) // the batch is full at 4 MiB: small waits too
	q = append(q, other, small)
	take, keep := nextBatch(q)
	require.Len(t, take, maxBatchOutputBytes/big, "64 items of 64 KiB make 4 MiB")
	assert.Equal(t, q[:64], take)
	assert.Equal(t, append(append([]*batchItem{}, q[64:70]...), other, small), keep, "the rest, in order")

	take, keep = nextBatch([]*batchItem{item(1, maxBatchOutputBytes+1), item(1, 1)})
	assert.Len(t, take, 1, "the first item goes whatever its size")
	assert.Len(t, keep, 1)

	var many []*batchItem
	for range protocol.MaxCompletionBatch + 5 {
		many = append(many, item(3, 0))
	}
	take, keep = nextBatch(many)
	assert.Len(t, take, protocol.MaxCompletionBatch)
	assert.Len(t, keep, 5)
}

package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// steppedSlots drives a SlotWait by hand: the test frees slots, learns
// when Wait has read the count again, and fires the window's timer.
type steppedSlots struct {
	t      *testing.T
	mu     sync.Mutex
	free   int
	freed  chan struct{}
	reads  chan int           // each Free() result, in order
	timers chan time.Duration // each window started
	fire   chan time.Time     // the window's timer
}

func newSteppedSlots(t *testing.T, free int) *steppedSlots {
	return &steppedSlots{t: t, free: free, freed: make(chan struct{}, 1), reads: make(chan int, 64),
		timers: make(chan time.Duration, 8), fire: make(chan time.Time, 1)}
}

func (s *steppedSlots) wait(capacity int, window time.Duration) <-chan int {
	w := SlotWait{Capacity: capacity, Window: window, Freed: s.freed,
		Free: func() int {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.reads <- s.free
			return s.free
		},
		After: func(d time.Duration) <-chan time.Time { s.timers <- d; return s.fire },
	}
	got := make(chan int, 1)
	go func() {
		n, ok := w.Wait(context.Background())
		assert.True(s.t, ok)
		got <- n
	}()
	return got
}

// waitFull starts a Wait on an agent with every slot taken, once it has
// read the count.
func waitFull(t *testing.T, capacity int, window time.Duration) (*steppedSlots, <-chan int) {
	s := newSteppedSlots(t, 0)
	got := s.wait(capacity, window)
	s.readUntil(0)
	return s, got
}

// release frees n more slots as one completion does, then waits until
// Wait has read the new count (so no signal is coalesced away).
func (s *steppedSlots) release(n int) {
	s.mu.Lock()
	s.free += n
	want := s.free
	s.mu.Unlock()
	signal(s.freed)
	s.readUntil(want)
}

func (s *steppedSlots) readUntil(want int) {
	for {
		select {
		case n := <-s.reads:
			if n == want {
				return
			}
		case <-time.After(10 * time.Second):
			s.t.Fatalf("Wait never read %d free slots", want)
		}
	}
}

func (s *steppedSlots) timerStarted() time.Duration {
	select {
	case d := <-s.timers:
		return d
	case <-time.After(10 * time.Second):
		s.t.Fatal("Wait started no window")
		return 0
	}
}

func waitResult(t *testing.T, got <-chan int) int {
	select {
	case n := <-got:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return")
		return 0
	}
}

// TestClaimWindowGathersWhatFreesWithinIt: with all slots taken, the
// completions that land one by one inside the window, fewer than the
// target, are claimed in one round when the window ends; a single
// completion while others still run waits the window, no longer.
func TestClaimWindowGathersWhatFreesWithinIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		capacity int
		window   time.Duration
		releases []int
	}{
		{"a burst of three, target 4", 8, 5 * time.Millisecond, []int{1, 1, 1}},
		{"one completion, target 2", 4, 3 * time.Millisecond, []int{1}},
	} {
		s, got := waitFull(t, c.capacity, c.window)
		s.release(c.releases[0])
		assert.Equal(t, c.window, s.timerStarted(), "%s: the first free slot opens the window", c.name)
		for _, n := range c.releases[1:] {
			s.release(n)
		}
		s.fire <- time.Now()
		assert.Equal(t, len(c.releases), waitResult(t, got), "%s: one claim for every slot freed within the window", c.name)
		assert.Empty(t, s.timers, "%s: one window per claim", c.name)
	}
}

// TestClaimWindowEndsAtTheTarget: when the freed slots reach half the
// capacity inside the window, the agent claims them at once without
// waiting for the window's end.
func TestClaimWindowEndsAtTheTarget(t *testing.T) {
	t.Parallel()
	s, got := waitFull(t, 8, time.Second)
	s.release(2)
	s.timerStarted()
	s.release(2)
	assert.Equal(t, 4, waitResult(t, got))
}

// TestClaimWindowIdleAgentClaimsAtOnce: a completion that leaves nothing
// running frees every slot, at least the target, so the agent claims at
// once; so does an agent that finds half its slots or more free.
func TestClaimWindowIdleAgentClaimsAtOnce(t *testing.T) {
	t.Parallel()
	s, got := waitFull(t, 1, time.Second)
	s.release(1)
	assert.Equal(t, 1, waitResult(t, got), "the only task ended")
	assert.Empty(t, s.timers, "no window started")

	s = newSteppedSlots(t, 3)
	got = s.wait(4, time.Second)
	assert.Equal(t, 3, waitResult(t, got), "one task of four running")
	assert.Empty(t, s.timers, "no window started")
}

// TestClaimWindowOffClaimsAtOnce: with the window off (0 or
// ClaimWindowOff), one free slot of many is claimed at once.
func TestClaimWindowOffClaimsAtOnce(t *testing.T) {
	t.Parallel()
	for _, window := range []time.Duration{0, ClaimWindowOff} {
		s, got := waitFull(t, 8, window)
		s.release(1)
		assert.Equal(t, 1, waitResult(t, got), "window %s", window)
		assert.Empty(t, s.timers, "window %s: no timer", window)
	}
}

// TestClaimWindowStopsWithTheContext: a cancelled wait returns false,
// inside the window too.
func TestClaimWindowStopsWithTheContext(t *testing.T) {
	t.Parallel()
	freed := make(chan struct{}, 1)
	free := 1
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	started := make(chan struct{})
	w := SlotWait{Capacity: 8, Window: time.Second, Freed: freed, Free: func() int { return free },
		After: func(time.Duration) <-chan time.Time { close(started); return nil }}
	go func() { _, ok := w.Wait(ctx); done <- ok }()
	<-started
	cancel()
	assert.False(t, <-done)
}

func TestClaimTarget(t *testing.T) {
	t.Parallel()
	for capacity, want := range map[int]int{1: 1, 2: 1, 3: 2, 4: 2, 128: 64, 129: 65} {
		assert.Equal(t, want, ClaimTarget(capacity), "capacity %d", capacity)
	}
}

// TestAgentClaimsTheSlotsABurstFrees: a real agent of capacity 4 runs
// four tasks; two of them end together. Its window's timer never fires,
// so only the second freed slot (half the capacity) can end the wait:
// the next claim asks for both slots in one round, not one per
// completion. The other two end afterwards so the agent drains.
func TestAgentClaimsTheSlotsABurstFrees(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	dir := t.TempDir()
	first, later := filepath.Join(dir, "first"), filepath.Join(dir, "later")
	var tasks []protocol.ClaimedTask
	for _, gate := range []string{first, first, later, later} {
		tasks = append(tasks, f.enqueue(0, map[string]string{"GATE": gate}, sh(`while [ ! -e "$GATE" ]; do sleep 0.01; done`)...))
	}
	claims := func() []int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return slices.Clone(f.claims)
	}
	startAgent(t, []string{srv.URL}, func(c *Config) { c.Capacity = 4 }, func(a *Agent) {
		a.slots.After = func(time.Duration) <-chan time.Time { return nil } // the window never ends
	})
	require.Eventually(t, func() bool { return f.isStarted(tasks[3].AttemptID) }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []int{4}, claims(), "an idle agent claims all its slots at once")
	require.NoError(t, os.WriteFile(first, nil, 0o644))
	require.Eventually(t, func() bool { return len(claims()) >= 2 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, 2, claims()[1], "both slots the burst freed, in one claim round")
	require.NoError(t, os.WriteFile(later, nil, 0o644))
	for _, task := range tasks {
		assert.Equal(t, state.OutcomeSuccess, f.waitCompletion(task.AttemptID, 10*time.Second).Outcome)
	}
}

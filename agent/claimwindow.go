package agent

import (
	"context"
	"time"
)

// DefaultClaimWindow is Config.ClaimWindow's default: how long a freed
// slot may wait for others before the agent claims (docs/design.md §4
// claim; docs/performance.md "Fewer, larger claim rounds" has the
// measurements it was chosen from).
const DefaultClaimWindow = 2 * time.Millisecond

// ClaimWindowOff in Config.ClaimWindow turns the window off: the agent
// claims as soon as one slot is free. `--claim-window 0` sets it.
const ClaimWindowOff time.Duration = -1

// ClaimTarget is how many free slots end a claim window at once for an
// agent of capacity slots: half of them, rounded up (1 for capacity 1
// or 2, so such agents never wait). An agent with nothing running has
// all its slots free, at least the target, so it never waits either.
func ClaimTarget(capacity int) int { return (capacity + 1) / 2 }

// SlotWait decides when an agent claims: at once when at least
// ClaimTarget(Capacity) slots are free, otherwise Window after it first
// saw a free slot, so that the slots the agent's other tasks free within
// the window travel in the same claim round (docs/design.md §4 claim;
// adr/0018 amendment "claim window"). `vigil agent`, `vigil lite` and the
// bench's synthetic agents share it.
type SlotWait struct {
	// Capacity is the agent's number of slots (≥ 1).
	Capacity int
	// Window bounds the wait of a free slot for others; ≤ 0 claims as
	// soon as one slot is free.
	Window time.Duration
	// Free returns the number of slots free now. It is called again
	// after every signal on Freed.
	Free func() int
	// Freed receives a value after a slot is freed; a 1-buffered channel
	// written without blocking is enough, as Free is read after each.
	Freed <-chan struct{}
	// After starts the window's timer; nil uses time.After. Tests step
	// it.
	After func(time.Duration) <-chan time.Time
}

// Wait blocks until the agent should claim and returns the number of
// free slots to claim (≥ 1), or false when ctx is done first.
func (w SlotWait) Wait(ctx context.Context) (int, bool) {
	free := w.Free()
	for free < 1 {
		select {
		case <-ctx.Done():
			return 0, false
		case <-w.Freed:
			free = w.Free()
		}
	}
	target := ClaimTarget(w.Capacity)
	if w.Window <= 0 || free >= target {
		return free, true
	}
	after := w.After
	if after == nil {
		after = time.After
	}
	deadline := after(w.Window)
	for {
		select {
		case <-ctx.Done():
			return 0, false
		case <-deadline:
			return w.Free(), true
		case <-w.Freed:
			if free = w.Free(); free >= target {
				return free, true
			}
		}
	}
}

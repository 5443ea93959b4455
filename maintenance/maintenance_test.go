package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var quiet = slog.New(slog.DiscardHandler)

// gate is a pass that records each call and blocks until released, so a
// test decides exactly when a pass ends.
type gate struct {
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (g *gate) pass(ctx context.Context) error {
	g.calls.Add(1)
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	return nil
}

func (g *gate) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("pass did not start")
	}
}

// Wakes sent while a pass runs fold into exactly one more pass: a burst
// of completions costs one tick, not one each.
func TestWakesDuringAPassCoalesceIntoOne(t *testing.T) {
	t.Parallel()
	wake := make(chan struct{}, 1)
	g := newGate()
	s := New(Config{Name: "tick", Interval: time.Hour, Wake: wake}, g.pass)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, nil, quiet) }()
	g.waitEntered(t) // the first pass runs at once
	for i := 0; i < 100; i++ {
		select {
		case wake <- struct{}{}:
		default: // the channel holds one pending wake: the rest coalesce
		}
	}
	g.release <- struct{}{}
	g.waitEntered(t) // one more pass for the whole burst
	g.release <- struct{}{}
	select {
	case <-g.entered:
		t.Fatal("a third pass ran: the burst was not coalesced")
	case <-time.After(100 * time.Millisecond):
	}
	assert.EqualValues(t, 2, g.calls.Load())
	cancel()
	require.NoError(t, <-done)
}

// One service's slow pass does not delay another's, and Stuck reports a
// pass that outlives its deadline while ignoring it.
func TestSlowServiceDoesNotDelayOthersAndIsReportedStuck(t *testing.T) {
	t.Parallel()
	slow := newGate()
	var fast atomic.Int32
	stubborn := func(ctx context.Context) error { // ignores its deadline
		slow.calls.Add(1)
		slow.entered <- struct{}{}
		<-slow.release
		return nil
	}
	g := NewGroup(quiet, nil,
		New(Config{Name: "slow", Interval: time.Hour, Timeout: 50 * time.Millisecond}, stubborn),
		New(Config{Name: "fast", Interval: 10 * time.Millisecond}, func(context.Context) error { fast.Add(1); return nil }),
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	slow.waitEntered(t)
	require.Eventually(t, func() bool { return fast.Load() >= 5 }, 5*time.Second, 5*time.Millisecond,
		"the fast service keeps its interval while the slow one is in a pass")
	require.Eventually(t, func() bool { return len(g.Stuck(time.Now())) == 1 }, 5*time.Second, 10*time.Millisecond)
	assert.Contains(t, g.Stuck(time.Now())[0], "slow (in one pass for")
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while a pass was still running: Stop must wait")
	case <-time.After(50 * time.Millisecond):
	}
	close(slow.release)
	require.NoError(t, <-done)
	assert.Empty(t, g.Stuck(time.Now()))
}

// A fatal error (a fenced write) from one service stops the whole group
// and is returned; other errors are retried on the next interval.
func TestFatalErrorStopsTheGroup(t *testing.T) {
	t.Parallel()
	fenced := errors.New("fenced")
	var retried atomic.Int32
	g := NewGroup(quiet, func(err error) bool { return errors.Is(err, fenced) },
		New(Config{Name: "flaky", Interval: 5 * time.Millisecond}, func(context.Context) error {
			retried.Add(1)
			return errors.New("database hiccup")
		}),
		New(Config{Name: "fenced", Interval: time.Hour, InitialDelay: 100 * time.Millisecond},
			func(context.Context) error { return fenced }),
		New(Config{Name: "idle", Interval: time.Hour}, func(context.Context) error { return nil }),
	)
	err := g.Run(context.Background())
	require.ErrorIs(t, err, fenced)
	assert.GreaterOrEqual(t, retried.Load(), int32(2), "a non-fatal error is retried on the next interval")
}

// Exclusive work waits for the service's pass in progress and runs under
// the service's deadline.
func TestExclusiveWaitsForThePassInProgress(t *testing.T) {
	t.Parallel()
	g := newGate()
	s := New(Config{Name: "reaper", Interval: time.Hour, Timeout: time.Minute}, g.pass)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, nil, quiet) }()
	g.waitEntered(t)
	var ran atomic.Bool
	excl := make(chan error, 1)
	go func() {
		excl <- s.Exclusive(context.Background(), func(ctx context.Context) error {
			dl, ok := ctx.Deadline()
			if !ok || time.Until(dl) > time.Minute {
				return errors.New("no service deadline")
			}
			ran.Store(true)
			return nil
		})
	}()
	select {
	case <-excl:
		t.Fatal("exclusive work overlapped the pass in progress")
	case <-time.After(50 * time.Millisecond):
	}
	assert.False(t, ran.Load())
	g.release <- struct{}{}
	require.NoError(t, <-excl)
	assert.True(t, ran.Load())
	cancel()
	require.NoError(t, <-done)
}

func TestNewPanicsOnProgrammerErrors(t *testing.T) {
	t.Parallel()
	assert.Panics(t, func() { New(Config{Interval: time.Second}, func(context.Context) error { return nil }) })
	assert.Panics(t, func() { New(Config{Name: "x"}, func(context.Context) error { return nil }) })
	s := New(Config{Name: "x", Interval: time.Second}, func(context.Context) error { return nil })
	assert.Equal(t, 30*time.Second, s.cfg.Timeout, "the default deadline is max(4 × interval, 30 s)")
}

// MaxDuty stretches the wait after a slow pass so that passes take at
// most that share of the wall time, and never shortens Interval.
func TestNextWaitBoundsTheDutyCycle(t *testing.T) {
	for _, c := range []struct {
		interval, took time.Duration
		duty           float64
		want           time.Duration
	}{
		{2 * time.Second, 340 * time.Millisecond, 0, 2 * time.Second},            // no bound
		{2 * time.Second, 340 * time.Millisecond, 1, 2 * time.Second},            // 1: no bound
		{2 * time.Second, 50 * time.Millisecond, 0.05, 2 * time.Second},          // cheap: Interval
		{2 * time.Second, 340 * time.Millisecond, 0.05, 6460 * time.Millisecond}, // 340 ms in 6.8 s: 5%
		{10 * time.Second, 340 * time.Millisecond, 0.05, 10 * time.Second},       // default sweep interval
		{time.Second, 3 * time.Second, 0.25, 9 * time.Second},                    // 3 s in 12 s: 25%
	} {
		assert.Equal(t, c.want, nextWait(c.interval, c.took, c.duty), "%+v", c)
	}
}

// A pass that returns ErrFinished (wrapped or not) ends its own service
// without error while the Group's other services go on.
func TestFinishedServiceEndsAloneWithoutError(t *testing.T) {
	t.Parallel()
	var passes atomic.Int32
	finished := New(Config{Name: "watch", Interval: time.Millisecond}, func(context.Context) error {
		if passes.Add(1) == 3 {
			return fmt.Errorf("fence changed: %w", ErrFinished)
		}
		return nil
	})
	require.NoError(t, finished.Run(context.Background(), func(error) bool { return true }, quiet),
		"ErrFinished is neither fatal nor logged: the loop just ends")
	assert.EqualValues(t, 3, passes.Load())

	passes.Store(0)
	other := newGate()
	g := NewGroup(quiet, nil, finished, New(Config{Name: "other", Interval: time.Hour}, other.pass))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	other.waitEntered(t)
	require.Eventually(t, func() bool { return passes.Load() == 3 }, 5*time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the group ended with its finished service: %v", err)
	default:
	}
	cancel()
	require.NoError(t, <-done)
}

package chaos

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// steppedClock is a laneClock that never sleeps: SleepUntil moves it
// forward, and the fake apply moves it by a fault's real duration.
type steppedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *steppedClock) SleepUntil(ctx context.Context, t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	return ctx.Err() == nil
}

func (c *steppedClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestALaneNeverOverlapsEvenWhenAFaultOverrunsItsHold replays the second
// 1,000-fault run's harness defect: two follower_restart faults on the
// control lane, planned apart, the first taking far longer than its hold
// (waiting for a leader, a slow stop and start). The second must start
// only once the first returned plus its settle time, and report its lag.
func TestALaneNeverOverlapsEvenWhenAFaultOverrunsItsHold(t *testing.T) {
	tm := DefaultTiming
	plan := []Fault{
		{Seq: 1, Kind: FollowerRestart, At: 0, Hold: time.Second},
		{Seq: 2, Kind: FollowerRestart, At: time.Second + settle(FollowerRestart, tm), Hold: time.Second},
		{Seq: 3, Kind: FollowerRestart, At: time.Minute, Hold: time.Second},
	}
	real := map[int]time.Duration{1: 9 * time.Second, 2: 2 * time.Second, 3: 2 * time.Second} // fault 1 overruns by 8s
	clk := &steppedClock{now: t0}
	apply := func(_ context.Context, f Fault) (FaultRecord, error) {
		rec := FaultRecord{Kind: f.Kind, Target: "r2", Start: clk.Now()}
		clk.advance(real[f.Seq])
		rec.End = clk.Now()
		return rec, nil
	}
	var runs []laneRun
	runLane(context.Background(), plan, t0, tm, clk, apply, func(r laneRun) { runs = append(runs, r) })
	require.Len(t, runs, 3)
	for i := 1; i < len(runs); i++ {
		assert.False(t, runs[i].Begun.Before(runs[i-1].Done.Add(settle(runs[i-1].Fault.Kind, tm))),
			"fault %d began at %s, before fault %d returned and settled", runs[i].Fault.Seq, runs[i].Begun, runs[i-1].Fault.Seq)
	}
	assert.Equal(t, t0.Add(9*time.Second+settle(FollowerRestart, tm)), runs[1].Rec.Start)
	assert.Equal(t, 8*time.Second, runs[1].Rec.Lag, "8 s behind plan: the first fault's overrun")
	assert.Equal(t, time.Duration(0), runs[0].Rec.Lag)
	assert.Equal(t, time.Duration(0), runs[2].Rec.Lag, "the lane caught up before fault 3")
	assert.Equal(t, "all n=3 p50=0s p95=8s p99=8s max=8s; control lane n=3 p50=0s p95=8s p99=8s max=8s; agent lanes n=0; slow-database lane n=0; etcd lane n=0",
		lagSummary([]FaultRecord{runs[0].Rec, runs[1].Rec, runs[2].Rec}))
}

// TestLanesRunApartAndTogether: faults of one lane never run at once and
// keep plan order; faults of different lanes do run at once (the control
// lane's first fault returns only after an agent lane's has begun).
func TestLanesRunApartAndTogether(t *testing.T) {
	plan := Plan(7, 300, 4, 100*time.Millisecond, DefaultTiming)
	var firstControl, firstAgent int
	for _, f := range plan {
		if f.lane() == laneControl && firstControl == 0 {
			firstControl = f.Seq
		}
		if f.lane() == 0 && firstAgent == 0 {
			firstAgent = f.Seq
		}
	}
	require.NotZero(t, firstControl)
	require.NotZero(t, firstAgent)
	agentBegun := make(chan struct{})
	var mu sync.Mutex
	active := map[int]int{}
	order := map[int][]int{}
	apply := func(_ context.Context, f Fault) (FaultRecord, error) {
		mu.Lock()
		active[f.lane()]++
		busy := active[f.lane()]
		order[f.lane()] = append(order[f.lane()], f.Seq)
		mu.Unlock()
		assert.Equal(t, 1, busy, "lane %d runs fault %d beside another", f.lane(), f.Seq)
		switch f.Seq {
		case firstAgent:
			close(agentBegun)
		case firstControl:
			select {
			case <-agentBegun:
			case <-time.After(10 * time.Second):
				t.Error("agent lane 0 did not run while the control lane was busy")
			}
		}
		mu.Lock()
		active[f.lane()]--
		mu.Unlock()
		return FaultRecord{Kind: f.Kind}, nil
	}
	n := 0
	runLanes(context.Background(), plan, t0, DefaultTiming, &steppedClock{now: t0}, apply, func(laneRun) {
		mu.Lock()
		n++
		mu.Unlock()
	})
	assert.Equal(t, len(plan), n)
	want := map[int][]int{}
	for _, f := range plan {
		want[f.lane()] = append(want[f.lane()], f.Seq)
	}
	assert.Equal(t, want, order, "each lane keeps plan order")
}

// TestAFaultWhoseRevertFailedStillHasItsLag: a leader_kill that killed
// its target and then could not restart it was injected, so it carries
// its lag into the history like any other; one that found no target was
// not, and carries none.
func TestAFaultWhoseRevertFailedStillHasItsLag(t *testing.T) {
	plan := []Fault{{Seq: 1, Kind: LeaderKill, At: 0, Hold: time.Second}, {Seq: 2, Kind: LeaderKill, At: time.Minute, Hold: time.Second}}
	clk := &steppedClock{now: t0}
	apply := func(_ context.Context, f Fault) (FaultRecord, error) {
		if f.Seq == 2 {
			return FaultRecord{Kind: f.Kind}, errors.New("no leader to target")
		}
		clk.advance(3 * time.Second)
		rec := FaultRecord{Kind: f.Kind, Target: "r1", Start: clk.Now()}
		clk.advance(f.Hold)
		rec.End = clk.Now()
		return rec, errors.New("restart r1: exited at once")
	}
	var runs []laneRun
	runLane(context.Background(), plan, t0, DefaultTiming, clk, apply, func(r laneRun) { runs = append(runs, r) })
	require.Len(t, runs, 2)
	assert.Equal(t, 3*time.Second, runs[0].Rec.Lag, "injected 3 s late, then its restart failed")
	assert.Zero(t, runs[1].Rec.Lag, "never injected")
	assert.True(t, runs[1].Rec.Start.IsZero())
}

package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// laneClock is runLane's time source: the wall clock in a run, a stepped
// clock in the unit tests.
type laneClock interface {
	Now() time.Time
	// SleepUntil waits until t; false when ctx ended first.
	SleepUntil(ctx context.Context, t time.Time) bool
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) SleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// applyFunc injects one fault, holds it, reverts it (restarting what it
// stopped) and returns its record.
type applyFunc func(ctx context.Context, f Fault) (FaultRecord, error)

// laneRun is what a lane did with one fault: when it was due on paper
// (the phase's begin plus its planned offset), when apply was called and
// returned, and apply's result. Rec.Lag is set when the fault was
// injected (Rec.Start set), whether or not apply then failed.
type laneRun struct {
	Fault   Fault
	Planned time.Time
	Begun   time.Time
	Done    time.Time
	Rec     FaultRecord
	Err     error
}

// runLane runs one lane's faults, in plan order, strictly one after the
// other: each starts at the later of its planned time and the previous
// fault's return plus that fault's settle time (plan.go). A fault whose
// real duration outran its hold (a leader to wait for, a slow stop or
// start-up) delays the rest of its lane instead of overlapping the next
// fault, which is what Plan assumed (docs/reliability.md, "Faults"). done
// is called after each fault. It returns when the lane is finished or
// ctx ends.
func runLane(ctx context.Context, faults []Fault, begin time.Time, t Timing, clk laneClock, apply applyFunc, done func(laneRun)) {
	var free time.Time
	for _, f := range faults {
		run := laneRun{Fault: f, Planned: begin.Add(f.At)}
		if !clk.SleepUntil(ctx, later(run.Planned, free)) {
			return
		}
		run.Begun = clk.Now()
		run.Rec, run.Err = apply(ctx, f)
		run.Done = clk.Now()
		if !run.Rec.Start.IsZero() { // injected, even when its revert failed
			run.Rec.Lag = run.Rec.Start.Sub(run.Planned)
		}
		free = run.Done.Add(settle(f.Kind, t))
		done(run)
	}
}

// runLanes splits plan by lane (Fault.lane, the same lanes as Plan's) and
// runs the lanes concurrently, each with runLane; done may be called from
// several goroutines at once. It returns when every lane is finished.
func runLanes(ctx context.Context, plan []Fault, begin time.Time, t Timing, clk laneClock, apply applyFunc, done func(laneRun)) {
	lanes := map[int][]Fault{}
	var order []int
	for _, f := range plan {
		l := f.lane()
		if _, ok := lanes[l]; !ok {
			order = append(order, l)
		}
		lanes[l] = append(lanes[l], f)
	}
	var wg sync.WaitGroup
	for _, l := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runLane(ctx, lanes[l], begin, t, clk, apply, done)
		}()
	}
	wg.Wait()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// lagSummary gives the percentiles of how far behind plan the faults
// started (FaultRecord.Lag), over all faults and per kind of lane, for
// the report.
func lagSummary(fs []FaultRecord) string {
	var all, control, agents, slow, etcd []time.Duration
	for _, f := range fs {
		lag := max(f.Lag, 0)
		all = append(all, lag)
		switch (Fault{Kind: f.Kind}).lane() {
		case laneControl:
			control = append(control, lag)
		case laneSlow:
			slow = append(slow, lag)
		case laneEtcd:
			etcd = append(etcd, lag)
		default:
			agents = append(agents, lag)
		}
	}
	return fmt.Sprintf("all %s; control lane %s; agent lanes %s; slow-database lane %s; etcd lane %s",
		percentiles(all), percentiles(control), percentiles(agents), percentiles(slow), percentiles(etcd))
}

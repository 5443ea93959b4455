package scheduler

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/vigil-sched/vigil/maintenance"
	"github.com/vigil-sched/vigil/reaper"
)

// stallDetector owns the post-leadership grace of one term (docs/design.md §6).
// It reads the database clock on a short ticker over a connection of its
// own and restarts the grace when a reading failed (the database was
// unreachable) or came later than gapLimit after the previous one (the
// process or the database was paused: agents could not heartbeat
// meanwhile). It measures whether the leader could run, never how long
// any service's work took, so a slow tick or sweep is not a stall.
type stallDetector struct {
	s        *Scheduler
	epoch    int64
	clock    reaper.Clock
	lastDB   time.Time // database clock of the previous good reading
	down     bool      // the previous reading failed
	lastGood atomic.Int64
}

// every is how often the detector reads the clock: often enough that a
// healthy leader is never near the gap limit.
func (d *stallDetector) every() time.Duration {
	return min(time.Second, d.s.gapLimit()/4)
}

// start records the term with its first grace start; it retries while the
// database is down and returns ctx's error if the term ends first.
func (d *stallDetector) start(ctx context.Context) error {
	for {
		now, err := d.clock.Now(ctx)
		if err == nil {
			d.lastDB = now
			d.lastGood.Store(time.Now().UnixNano())
			d.s.setTerm(&reaper.Term{Epoch: d.epoch, GraceStart: now, CheckedAt: now, MaxGap: d.s.gapLimit()})
			return nil
		}
		d.s.log.Warn("cannot read the database clock; retrying", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d.every()):
		}
	}
}

// service runs runOnce every every(), each reading bounded by half the
// gap limit.
func (d *stallDetector) service() *maintenance.Service {
	return maintenance.New(maintenance.Config{Name: ServiceStall, Interval: d.every(), Timeout: d.s.gapLimit() / 2}, d.runOnce)
}

// runOnce takes one clock reading.
func (d *stallDetector) runOnce(ctx context.Context) error {
	now, err := d.clock.Now(ctx)
	if err != nil {
		d.down = true
		return fmt.Errorf("read the database clock: %w", err)
	}
	cur := d.s.currentTerm()
	next := &reaper.Term{Epoch: d.epoch, GraceStart: cur.GraceStart, CheckedAt: now, MaxGap: d.s.gapLimit()}
	if gap := now.Sub(d.lastDB); d.down || gap > next.MaxGap {
		next.GraceStart = now
		d.s.log.Info("agent-lost grace restarted: agents could not report meanwhile",
			"database_was_unreachable", d.down, "gap", gap.Round(time.Millisecond), "grace_start", now)
	}
	d.lastDB, d.down = now, false
	d.s.setTerm(next)
	d.lastGood.Store(time.Now().UnixNano())
	return nil
}

// silence is how long ago, on this process's clock, the last good reading
// was taken.
func (d *stallDetector) silence() time.Duration {
	return time.Since(time.Unix(0, d.lastGood.Load()))
}

package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/vigil-sched/vigil/maintenance"
	"github.com/vigil-sched/vigil/reaper"
)

// stallConfig configures one term's stall detector.
type stallConfig struct {
	// Epoch is the term's fencing epoch, carried in every Term it sets.
	Epoch int64
	// GapLimit is the longest pause between two good readings that does
	// not restart the grace (Scheduler.gapLimit). Required, > 0.
	GapLimit time.Duration
	// Every is how often the detector reads the clock; default
	// min(1 s, GapLimit / 4), so a healthy leader is never near the limit.
	Every time.Duration
	// Clock is the database clock, on a connection of its own. Required.
	Clock reaper.Clock
	// SetTerm receives each new view of the term (reaper.Term). Required.
	SetTerm func(*reaper.Term)
}

// stallDetector owns the post-leadership grace of one term (docs/design.md §6).
// It reads the database clock on a short ticker over a connection of its
// own and restarts the grace when a reading failed (the database was
// unreachable) or came later than GapLimit after the previous one (the
// process or the database was paused: agents could not heartbeat
// meanwhile). It measures whether the leader could run, never how long
// any service's work took, so a slow tick or sweep is not a stall.
type stallDetector struct {
	cfg      stallConfig
	log      *slog.Logger
	term     reaper.Term // the last one set; its GraceStart carries on
	lastDB   time.Time   // database clock of the previous good reading
	down     bool        // the previous reading failed
	lastGood atomic.Int64
}

// newStallDetector fills cfg's zero Every; it panics on a programmer
// error (no gap limit, clock or SetTerm).
func newStallDetector(cfg stallConfig, log *slog.Logger) *stallDetector {
	if cfg.GapLimit <= 0 || cfg.Clock == nil || cfg.SetTerm == nil {
		panic("scheduler: the stall detector needs a gap limit, a clock and SetTerm")
	}
	cfg.Every = cmp.Or(cfg.Every, min(time.Second, cfg.GapLimit/4))
	return &stallDetector{cfg: cfg, log: log}
}

// service runs runOnce every Every, each reading bounded by half the gap
// limit.
func (d *stallDetector) service() *maintenance.Service {
	return maintenance.New(maintenance.Config{Name: ServiceStall, Interval: d.cfg.Every, Timeout: d.cfg.GapLimit / 2}, d.runOnce)
}

// start sets the term with its first grace start; it retries while the
// database is down and returns ctx's error if the term ends first.
func (d *stallDetector) start(ctx context.Context) error {
	for {
		now, err := d.cfg.Clock.Now(ctx)
		if err == nil {
			d.lastDB = now
			d.lastGood.Store(time.Now().UnixNano())
			d.set(reaper.Term{Epoch: d.cfg.Epoch, GraceStart: now, CheckedAt: now, MaxGap: d.cfg.GapLimit})
			return nil
		}
		d.log.Warn("cannot read the database clock; retrying", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d.cfg.Every):
		}
	}
}

// runOnce takes one clock reading and sets the term it implies.
func (d *stallDetector) runOnce(ctx context.Context) error {
	now, err := d.cfg.Clock.Now(ctx)
	if err != nil {
		d.down = true
		return fmt.Errorf("read the database clock: %w", err)
	}
	next := reaper.Term{Epoch: d.cfg.Epoch, GraceStart: d.term.GraceStart, CheckedAt: now, MaxGap: d.cfg.GapLimit}
	if gap := now.Sub(d.lastDB); d.down || gap > next.MaxGap {
		next.GraceStart = now
		d.log.Info("agent-lost grace restarted: agents could not report meanwhile",
			"database_was_unreachable", d.down, "gap", gap.Round(time.Millisecond), "grace_start", now)
	}
	d.lastDB, d.down = now, false
	d.set(next)
	d.lastGood.Store(time.Now().UnixNano())
	return nil
}

func (d *stallDetector) set(t reaper.Term) {
	d.term = t
	d.cfg.SetTerm(&t)
}

// silence is how long ago, on this process's clock, the last good reading
// was taken.
func (d *stallDetector) silence() time.Duration {
	return time.Since(time.Unix(0, d.lastGood.Load()))
}

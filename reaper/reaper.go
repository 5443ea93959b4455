// Package reaper turns stuck state into observable terminal state without
// ever killing a live execution (DESIGN §6; Leoflow scheduler-resilience).
//
// There are three reapers, one per file: agent-lost (running TIs whose
// agent went silent), dispatch-lost (queued TIs no active agent can take)
// and orphan-run (running runs with nothing left to do). Each obeys the
// "do no harm" rule:
//  1. it lists only candidates carrying a positive observable signal, and
//  2. it acts on each with a single conditional UPDATE whose WHERE
//     re-checks that exact signal, so a heartbeat, claim or completion that
//     commits first wins.
//
// Every decision increments vigil_scheduler_decisions_total{decision},
// writes an event on its run (in the same transaction as the UPDATE) and
// logs one structured line. Reapers run only on the leader, and every
// write is fenced by the term's epoch.
package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// Clock returns "now" for threshold comparisons. Production uses the
// database clock (DBClock); tests step a fake one (DESIGN §11).
type Clock interface {
	Now(ctx context.Context) (time.Time, error)
}

// DBClock reads now() from PostgreSQL, so replicas never compare against
// their own clocks (DESIGN §3).
type DBClock struct{ Store *store.Store }

// Now implements Clock.
func (c DBClock) Now(ctx context.Context) (time.Time, error) { return c.Store.Now(ctx) }

// DefaultBatch bounds how many candidates one reaper handles per sweep.
const DefaultBatch = 500

// Term is what a sweep needs to know about the leader's term: its fencing
// epoch, and since when it has led with the database reachable (on the
// database clock). Staleness accrued before GraceStart is not counted.
type Term struct {
	Epoch      int64
	GraceStart time.Time
	// CheckedAt is when the leader last confirmed, on the database clock,
	// that it was not stalled; MaxGap is the longest pause it tolerates.
	// A sweep whose own clock reading is further than MaxGap past
	// CheckedAt was itself stalled after the check, and holds back the
	// heartbeat-based reapers until the leader restarts the grace. Zero
	// MaxGap disables the check.
	CheckedAt time.Time
	MaxGap    time.Duration
}

// Config configures the reapers. Store, Metrics and Thresholds are
// required.
type Config struct {
	Store      *store.Store
	Metrics    *metrics.Metrics
	Logger     *slog.Logger
	Clock      Clock // default DBClock
	Thresholds func() Thresholds
	Batch      int // per reaper per sweep; default DefaultBatch
}

// Reapers runs the three reapers. It is stateless between sweeps: a new
// leader needs nothing from the old one.
type Reapers struct {
	cfg Config
	log *slog.Logger
}

// New validates cfg.
func New(cfg Config) (*Reapers, error) {
	if cfg.Store == nil || cfg.Metrics == nil || cfg.Thresholds == nil {
		return nil, errors.New("reaper: Store, Metrics and Thresholds are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = DBClock{Store: cfg.Store}
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Reapers{cfg: cfg, log: cfg.Logger.With("component", "reaper")}, nil
}

// plan is one candidate with the guarded write that would act on it.
type plan struct {
	protocol.ReapCandidate
	apply func(ctx context.Context, epoch int64) (bool, error) // nil: nothing to write
}

// reaperFunc lists and classifies one reaper's candidates at now.
type reaperFunc func(ctx context.Context, now time.Time, term Term, th Thresholds) ([]plan, string, error)

func (r *Reapers) reapers() []struct {
	name string
	fn   reaperFunc
} {
	return []struct {
		name string
		fn   reaperFunc
	}{
		{ReaperAgentInactive, r.planInactiveAgents},
		{ReaperAgentLost, r.planAgentLost},
		{ReaperExecutionTimeout, r.planExecutionTimeouts},
		{ReaperRunTimeout, r.planRunTimeouts},
		{ReaperDispatchLost, r.planDispatchLost},
		{ReaperOrphan, r.planOrphans},
	}
}

// Reaper names, used in metric labels (<name>_list_error, <name>_error)
// and vigil_reaper_duration_seconds{reaper}.
const (
	ReaperAgentLost    = "agent_lost"
	ReaperDispatchLost = "dispatch_lost"
	ReaperOrphan       = "orphan"
	// The DESIGN §7 additions from Strøm.
	ReaperAgentInactive    = "agent_inactive"
	ReaperExecutionTimeout = "execution_timeout"
	ReaperRunTimeout       = "run_timeout"
)

// Sweep runs every reaper once for term and returns what each did. A
// failed list query counts <reaper>_list_error and the next sweep retries;
// a failing or panicking candidate counts <reaper>_error and does not stop
// the others. A fenced write aborts the sweep with the *store.FencedError.
func (r *Reapers) Sweep(ctx context.Context, term Term) (protocol.ReapReport, error) {
	return r.run(ctx, term, false)
}

// DryRun lists every candidate of every reaper, with its signal, age and
// the decision it would get, and writes nothing (vigil reap --dry-run).
func (r *Reapers) DryRun(ctx context.Context, term Term) (protocol.ReapReport, error) {
	return r.run(ctx, term, true)
}

func (r *Reapers) run(ctx context.Context, term Term, dry bool) (protocol.ReapReport, error) {
	rep := protocol.ReapReport{DryRun: dry, Candidates: []protocol.ReapCandidate{}}
	now, err := r.cfg.Clock.Now(ctx)
	if err != nil {
		return rep, fmt.Errorf("reaper clock: %w", err)
	}
	th := r.cfg.Thresholds()
	for _, rp := range r.reapers() {
		start := time.Now()
		plans, grace, err := rp.fn(ctx, now, term, th)
		if grace != "" {
			rep.Grace = strings.TrimSpace(rep.Grace + "\n" + grace)
		}
		if err != nil {
			r.cfg.Metrics.Decide(rp.name + metrics.DecisionSuffixListError)
			r.log.Warn("reaper list query failed; next sweep retries", "reaper", rp.name, "err", err)
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", rp.name, err))
			continue
		}
		for _, p := range plans {
			if !dry {
				applied, err := r.act(ctx, rp.name, term.Epoch, p)
				if store.IsFenced(err) {
					return rep, err
				}
				if err != nil {
					rep.Errors = append(rep.Errors, err.Error())
				}
				p.Applied = applied
			}
			rep.Candidates = append(rep.Candidates, p.ReapCandidate)
		}
		if !dry {
			r.cfg.Metrics.ReaperDuration.WithLabelValues(rp.name).Observe(time.Since(start).Seconds())
		}
	}
	return rep, nil
}

// act applies one plan in isolation: a panic or error is counted as
// <reaper>_error; a landed write counts its decision and logs it.
func (r *Reapers) act(ctx context.Context, name string, epoch int64, p plan) (applied bool, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("%s: candidate run %d panicked: %v", name, p.RunID, rec)
		}
		if err != nil && !store.IsFenced(err) {
			r.cfg.Metrics.Decide(name + metrics.DecisionSuffixCandidateError)
			r.log.Error("reaper candidate failed", "reaper", name, "run_id", p.RunID, "ti_id", p.TIID, "err", err)
		}
	}()
	if p.apply == nil {
		applied = true
	} else if applied, err = p.apply(ctx, epoch); err != nil || !applied {
		if err == nil {
			r.log.Info("reaper lost the race: the signal changed before the write", "reaper", name,
				"decision", p.Decision, "run_id", p.RunID, "ti_id", p.TIID)
		}
		return applied, err
	}
	r.cfg.Metrics.Decide(p.Decision)
	level := slog.LevelInfo
	if p.Decision == metrics.DecisionDispatchLostDeferred {
		level = slog.LevelDebug // a backlog is re-counted every sweep; its event is written once
	}
	r.log.Log(ctx, level, "scheduler decision", "decision", p.Decision, "run_id", p.RunID, "ti_id", p.TIID,
		"task_id", p.TaskID, "try_number", p.TryNumber, "agent_id", p.AgentID, "epoch", epoch,
		"signal", p.Signal, "signal_age_seconds", p.Age.D().Seconds(), "message", p.Message)
	return applied, nil
}

func ptr[T any](v T) *T { return &v }

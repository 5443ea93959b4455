// Package reaper turns stuck state into observable terminal state without
// ever killing a live execution (docs/design.md §6; Leoflow scheduler-resilience).
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
	"sync"
	"time"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// Clock returns "now" for threshold comparisons. Production uses the
// database clock (DBClock); tests step a fake one (docs/design.md §11).
type Clock interface {
	Now(ctx context.Context) (time.Time, error)
}

// DBClock reads now() from PostgreSQL, so replicas never compare against
// their own clocks (docs/design.md §3).
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
	// Force marks an operator's forced sweep (vigil reap; dry runs too):
	// the mass-silence brake does not hold it, and its verdict is not
	// recorded as the leader's.
	Force bool
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
	// MassSilence configures the mass-silence brake; nil means
	// DefaultMassSilence(). Errors from its Validate name the flag.
	MassSilence *MassSilence
}

// Reapers runs the three reapers. It is stateless between sweeps: a new
// leader needs nothing from the old one.
type Reapers struct {
	cfg Config
	log *slog.Logger
	ms  MassSilence

	brakeMu sync.Mutex                // guards brake, forced and sweeps
	brake   Brake                     // the mass-silence brake's last verdict, for health
	forced  map[state.Reaper]honoured // per reaper: the follower-forced sweep request it last honoured
	sweeps  map[state.Reaper]Sweep    // per reaper: its last pass that wrote (not a dry run)
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
	ms := DefaultMassSilence()
	if cfg.MassSilence != nil {
		ms = *cfg.MassSilence
	}
	if err := ms.Validate(); err != nil {
		return nil, fmt.Errorf("reaper: %w", err)
	}
	return &Reapers{cfg: cfg, log: cfg.Logger.With("component", "reaper"), ms: ms}, nil
}

// plan is one candidate with the guarded write that would act on it.
// TI transitions (reap) and agent flips (agent) are written in one batch
// statement per reaper pass; anything else through apply, one at a time.
type plan struct {
	Candidate
	reap  *store.Reap
	agent *store.StaleAgent
	apply func(ctx context.Context, epoch int64) (bool, error) // nil with reap/agent, or nothing to write
}

// reaperFunc lists and classifies one reaper's candidates at now.
type reaperFunc func(ctx context.Context, now time.Time, term Term, th Thresholds) ([]plan, string, error)

func (r *Reapers) reaper(name state.Reaper) reaperFunc {
	switch name {
	case state.ReaperAgentInactive:
		return r.planInactiveAgents
	case state.ReaperAgentLost:
		return r.planAgentLost
	case state.ReaperExecutionTimeout:
		return r.planExecutionTimeouts
	case state.ReaperRunTimeout:
		return r.planRunTimeouts
	case state.ReaperDispatchLost:
		return r.planDispatchLost
	case state.ReaperOrphan:
		return r.planOrphans
	}
	return nil
}

// Sweep runs every reaper once for term and returns what each did. A
// failed list query counts <reaper>_list_error and the next sweep retries;
// a failing or panicking candidate counts <reaper>_error and does not stop
// the others. A fenced write aborts the sweep with the *store.FencedError.
func (r *Reapers) Sweep(ctx context.Context, term Term) (Report, error) {
	return r.run(ctx, term, false, state.Reapers())
}

// DryRun lists every candidate of every reaper, with its signal, age and
// the decision it would get, and writes nothing (vigil reap --dry-run).
func (r *Reapers) DryRun(ctx context.Context, term Term) (Report, error) {
	return r.run(ctx, term, true, state.Reapers())
}

// Pass runs the one reaper called name (one of Names) for term: the
// service that owns it calls this on its own interval.
func (r *Reapers) Pass(ctx context.Context, name state.Reaper, term Term) (Report, error) {
	if r.reaper(name) == nil {
		return Report{}, fmt.Errorf("reaper: unknown reaper %q", name)
	}
	return r.run(ctx, term, false, []state.Reaper{name})
}

func (r *Reapers) run(ctx context.Context, term Term, dry bool, names []state.Reaper) (Report, error) {
	rep := Report{DryRun: dry, Candidates: []Candidate{}}
	now, err := r.cfg.Clock.Now(ctx)
	if err != nil {
		return rep, fmt.Errorf("reaper clock: %w", err)
	}
	th := r.cfg.Thresholds()
	if dry {
		term.Force = true // a dry run shows what a forced sweep would do
	}
	for _, name := range names {
		start := time.Now()
		before := len(rep.Candidates)
		errsBefore := len(rep.Errors)
		err := r.pages(ctx, name, now, term, th, dry, &rep)
		if !dry {
			r.cfg.Metrics.ReaperDuration.WithLabelValues(string(name)).Observe(time.Since(start).Seconds())
			r.recordSweep(name, now, time.Since(start), rep.Candidates[before:], len(rep.Errors)-errsBefore)
		}
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// recordSweep keeps name's last pass for LastSweeps.
func (r *Reapers) recordSweep(name state.Reaper, at time.Time, took time.Duration, cands []Candidate, errs int) {
	sw := Sweep{Reaper: name, At: at, Duration: took, Candidates: len(cands), Errors: errs}
	for _, c := range cands {
		if c.Applied {
			sw.Applied++
		}
	}
	r.brakeMu.Lock()
	defer r.brakeMu.Unlock()
	if r.sweeps == nil {
		r.sweeps = map[state.Reaper]Sweep{}
	}
	r.sweeps[name] = sw
}

// LastSweeps returns each reaper's last pass on this replica, in Names
// order; a reaper that has not swept here yet is left out.
func (r *Reapers) LastSweeps() []Sweep {
	r.brakeMu.Lock()
	defer r.brakeMu.Unlock()
	out := []Sweep{}
	for _, name := range state.Reapers() {
		if sw, ok := r.sweeps[name]; ok {
			out = append(out, sw)
		}
	}
	return out
}

// pages runs one reaper at one horizon (now), page after page: while a
// full page was written and every row of it left the candidate set, the
// next page is listed, so a pass keeps up with any number of stale rows
// (River's rescuer loop). A dry run lists one page. It returns only a
// fenced error; the others are in rep.
func (r *Reapers) pages(ctx context.Context, name state.Reaper, now time.Time, term Term, th Thresholds, dry bool, rep *Report) error {
	for ctx.Err() == nil {
		plans, grace, err := r.reaper(name)(ctx, now, term, th)
		for _, line := range strings.Split(strings.TrimSpace(grace), "\n") {
			rep.AddGrace(GraceNotice{Reaper: name, Message: strings.TrimSpace(line)})
		}
		if err == nil && dry && name == state.ReaperDispatchLost && len(plans) < r.cfg.Batch &&
			graceNotice(name, now, term, th) == "" {
			// A dry run also shows the backlog a pass leaves alone.
			var backlog []plan
			backlog, err = r.dispatchBacklogPlans(ctx, now, th, r.cfg.Batch-len(plans))
			plans = append(plans, backlog...)
		}
		if err != nil {
			r.cfg.Metrics.Decide(string(name) + metrics.DecisionSuffixListError)
			r.log.Warn("reaper list query failed; next sweep retries", "reaper", name, "err", err)
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", name, err))
			return nil
		}
		moved := 0
		if !dry {
			var errs []string
			errs, moved, err = r.applyAll(ctx, name, term.Epoch, plans)
			rep.Errors = append(rep.Errors, errs...)
			if err != nil {
				return err
			}
		}
		for _, p := range plans {
			rep.Candidates = append(rep.Candidates, p.Candidate)
		}
		if dry || len(plans) < r.cfg.Batch || moved < len(plans) {
			return nil
		}
	}
	return nil
}

// applyAll writes a reaper's plans: its TI transitions and agent flips in
// one batch statement each, the rest one at a time, and records every
// decision that landed. If a batch statement fails (other than by the
// fence), its candidates are retried one by one so that a single bad row
// is counted as <reaper>_error and does not stop the others. It returns
// the candidate errors, how many batched writes landed (rows that left
// the candidate set), and a *store.FencedError that ends the pass.
func (r *Reapers) applyAll(ctx context.Context, name state.Reaper, epoch int64, plans []plan) ([]string, int, error) {
	var reaps, agents []int
	for i, p := range plans {
		if p.reap != nil { // if, not switch: see LostAttempt
			reaps = append(reaps, i)
		} else if p.agent != nil {
			agents = append(agents, i)
		}
	}
	landed := map[int]bool{}
	if err := r.batch(ctx, epoch, plans, reaps, landed, r.applyReaps); err != nil {
		return nil, 0, err
	}
	if err := r.batch(ctx, epoch, plans, agents, landed, r.markInactive); err != nil {
		return nil, 0, err
	}
	var errs []string
	moved := 0
	for i := range plans {
		p := &plans[i]
		if p.reap != nil || p.agent != nil {
			if ok, done := landed[i]; done {
				p.Applied = r.record(ctx, name, epoch, *p, ok)
				if ok {
					moved++
				}
				continue
			}
		}
		applied, err := r.act(ctx, name, epoch, *p)
		if store.IsFenced(err) {
			return errs, moved, err
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
		p.Applied = applied
		if applied {
			moved++
		}
	}
	return errs, moved, nil
}

// batchFunc writes the plans at idx in one statement and marks which
// landed.
type batchFunc func(ctx context.Context, epoch int64, plans []plan, idx []int, landed map[int]bool) error

// batch runs fn over idx in chunks of the batch size. A fenced error is
// returned; any other error leaves the chunk's plans unmarked, so applyAll
// retries them one at a time.
func (r *Reapers) batch(ctx context.Context, epoch int64, plans []plan, idx []int, landed map[int]bool, fn batchFunc) error {
	for len(idx) > 0 {
		n := min(len(idx), r.cfg.Batch)
		err := fn(ctx, epoch, plans, idx[:n], landed)
		if store.IsFenced(err) {
			return err
		}
		if err != nil {
			r.log.Warn("reaper batch write failed; retrying its candidates one by one", "err", err)
			for _, i := range idx[:n] {
				delete(landed, i)
			}
		}
		idx = idx[n:]
	}
	return nil
}

func (r *Reapers) applyReaps(ctx context.Context, epoch int64, plans []plan, idx []int, landed map[int]bool) error {
	return writeBatch(ctx, epoch, plans, idx, landed, func(p plan) store.Reap { return *p.reap },
		func(c store.Reap) int64 { return c.TIID }, r.cfg.Store.ApplyReaps)
}

func (r *Reapers) markInactive(ctx context.Context, epoch int64, plans []plan, idx []int, landed map[int]bool) error {
	return writeBatch(ctx, epoch, plans, idx, landed, func(p plan) store.StaleAgent { return *p.agent },
		func(c store.StaleAgent) int64 { return c.AgentID }, r.cfg.Store.MarkAgentsInactive)
}

// writeBatch writes the candidates pick takes from plans[idx] with one
// call of write, which returns those that landed, and marks each plan
// landed or not by the candidate's id.
func writeBatch[C any](ctx context.Context, epoch int64, plans []plan, idx []int, landed map[int]bool,
	pick func(plan) C, id func(C) int64, write func(context.Context, int64, []C) ([]C, error)) error {
	in := make([]C, len(idx))
	for k, i := range idx {
		in[k] = pick(plans[i])
	}
	got, err := write(ctx, epoch, in)
	if err != nil {
		return err
	}
	ok := make(map[int64]bool, len(got))
	for _, g := range got {
		ok[id(g)] = true
	}
	for k, i := range idx {
		landed[i] = ok[id(in[k])]
	}
	return nil
}

// single is the one-at-a-time write of a batchable plan, used when its
// batch failed.
func (r *Reapers) single(p plan) func(ctx context.Context, epoch int64) (bool, error) {
	if p.reap != nil { // if, not switch: see LostAttempt
		return func(ctx context.Context, epoch int64) (bool, error) {
			return r.cfg.Store.ApplyReap(ctx, epoch, *p.reap)
		}
	}
	if p.agent != nil {
		return func(ctx context.Context, epoch int64) (bool, error) {
			got, err := r.cfg.Store.MarkAgentsInactive(ctx, epoch, []store.StaleAgent{*p.agent})
			return len(got) == 1, err
		}
	}
	return p.apply
}

// act applies one plan in isolation: a panic or error is counted as
// <reaper>_error; a landed write counts its decision and logs it.
func (r *Reapers) act(ctx context.Context, name state.Reaper, epoch int64, p plan) (applied bool, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("%s: candidate run %d panicked: %v", name, p.RunID, rec)
		}
		if err != nil && !store.IsFenced(err) {
			r.cfg.Metrics.Decide(string(name) + metrics.DecisionSuffixCandidateError)
			r.log.Error("reaper candidate failed", "reaper", name, "run_id", p.RunID, "ti_id", p.TIID, "err", err)
		}
	}()
	ok := true // a plan with nothing to write has landed by definition
	if apply := r.single(p); apply != nil {
		if ok, err = apply(ctx, epoch); err != nil {
			return false, err
		}
	}
	return r.record(ctx, name, epoch, p, ok), nil
}

// record counts and logs a decision that landed, or logs the lost race.
// It returns applied.
func (r *Reapers) record(ctx context.Context, name state.Reaper, epoch int64, p plan, applied bool) bool {
	if !applied {
		r.log.Info("reaper lost the race: the signal changed before the write", "reaper", name,
			"decision", p.Decision, "run_id", p.RunID, "ti_id", p.TIID)
		return false
	}
	r.cfg.Metrics.Decide(p.Decision)
	r.log.Log(ctx, slog.LevelInfo, "scheduler decision", "decision", p.Decision, "run_id", p.RunID, "ti_id", p.TIID,
		"task_id", p.TaskID, "try_number", p.TryNumber, "agent_id", p.AgentID, "epoch", epoch,
		"signal", p.Signal, "signal_age_seconds", p.Age.Seconds(), "message", p.Message)
	return true
}

func ptr[T any](v T) *T { return &v }

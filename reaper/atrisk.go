package reaper

import (
	"context"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// RunHorizon is how far ahead AtRisk looks for run timeout deadlines: a
// run is nearing its timeout once its time left is at most the smaller
// of RunHorizon and NearingFraction of its timeout (nearing).
const RunHorizon = 15 * time.Minute

// NearingFraction is the share of a run's timeout that, left, makes it
// nearing: a 10m timeout is listed in its last 2m30s, a 2h one in its
// last 15m (RunHorizon), so a short timeout is not at risk from its
// first second.
const NearingFraction = 4

// nearing reports whether a run with this timeout and time left is
// nearing its deadline.
func nearing(timeout, left time.Duration) bool {
	return left <= min(RunHorizon, timeout/NearingFraction)
}

// AtRisk lists the work a reaper will act on if nothing changes, with the
// time left before it does (GET /v1/at-risk, vigil at-risk, the console's
// At risk page; docs/scheduler-resilience.md "Work at risk"). It reuses
// the reapers' candidate queries and decisions at earlier horizons:
//   - agent-lost's query with a threshold of two heartbeat intervals lists
//     running TIs whose heartbeat is overdue by more than one interval,
//     and LostAttempt says what the reaper would decide;
//   - dispatch-lost's query with a zero threshold lists every queued TI no
//     active agent can take, and its plan says why;
//   - run-timeout's query at now + RunHorizon lists runs, kept when
//     nearing their deadline (see nearing).
//
// term is the leader's (nil on a follower, whose grace is unknown); any
// grace or brake that would hold a reaper back is reported in Grace.
// hbInterval is the agents' heartbeat interval. It writes nothing.
func (r *Reapers) AtRisk(ctx context.Context, term *Term, hbInterval time.Duration) (AtRiskReport, error) {
	return r.atRisk(ctx, term, hbInterval, 0)
}

// RunAtRisk is AtRisk for one run (GET /v1/at-risk?run_id=N): the run
// page's overdue hint and the reason its queued TIs wait. It reads that
// run's running and queued TIs (store.RunRunning, store.RunQueued) and
// judges them with the same rules and words as AtRisk.
func (r *Reapers) RunAtRisk(ctx context.Context, term *Term, hbInterval time.Duration, runID int64) (AtRiskReport, error) {
	return r.atRisk(ctx, term, hbInterval, runID)
}

// atRisk is AtRisk over every run (runID 0) or one.
func (r *Reapers) atRisk(ctx context.Context, term *Term, hbInterval time.Duration, runID int64) (AtRiskReport, error) {
	now, err := r.cfg.Clock.Now(ctx)
	if err != nil {
		return AtRiskReport{}, fmt.Errorf("reaper clock: %w", err)
	}
	th := r.cfg.Thresholds()
	out := AtRiskReport{Now: now, HeartbeatInterval: hbInterval, RunHorizon: RunHorizon, Thresholds: th,
		Running: []AtRiskRunning{}, Queued: []AtRiskQueued{}, Runs: []AtRiskRun{}}
	if err := r.atRiskRunning(ctx, now, th, hbInterval, runID, &out); err != nil {
		return out, err
	}
	if err := r.atRiskQueued(ctx, now, th, runID, &out); err != nil {
		return out, err
	}
	runs, err := r.cfg.Store.ListTimedOutRuns(ctx, now.Add(RunHorizon), r.cfg.Batch)
	if err != nil {
		return out, err
	}
	for _, c := range runs {
		left := max(c.Deadline.Sub(now), 0)
		if (runID != 0 && c.RunID != runID) || !nearing(c.Timeout, left) {
			continue
		}
		out.Runs = append(out.Runs, AtRiskRun{RunID: c.RunID, DAGID: c.DAGID, State: c.State,
			Timeout: c.Timeout, Deadline: c.Deadline, TimeLeft: left})
	}
	r.atRiskGrace(ctx, now, term, th, &out)
	return out, nil
}

// atRiskRunning lists running TIs whose heartbeat is overdue by more than
// one interval (silent for two): all of them, or those of runID.
func (r *Reapers) atRiskRunning(ctx context.Context, now time.Time, th Thresholds, hb time.Duration, runID int64, out *AtRiskReport) error {
	var stale []store.StaleRunning
	var err error
	if runID == 0 {
		stale, err = r.cfg.Store.ListStaleRunning(ctx, now, 2*hb, r.cfg.Batch)
	} else {
		stale, err = r.cfg.Store.RunRunning(ctx, runID, now)
	}
	if err != nil {
		return err
	}
	for _, c := range stale {
		if c.Age <= 2*hb {
			continue
		}
		silent := fmt.Sprintf("agent %s silent for %s (threshold %s)", agentName(c.AgentID), c.Age.Round(time.Second), th.AgentLost)
		reap := LostAttempt(c, silent)
		out.Running = append(out.Running, AtRiskRunning{
			RunID: c.RunID, TIID: c.TIID, TaskID: c.TaskID, TryNumber: c.TryNumber, AgentID: c.AgentID, Started: c.Started,
			LastHeartbeatAt: c.LastHeartbeatAt, Silent: c.Age, Overdue: c.Age - hb,
			TimeLeft: max(th.AgentLost-c.Age, 0), Decision: reap.EventKind, Outcome: reap.Message,
		})
	}
	return nil
}

// atRiskQueued lists queued TIs no active agent can take: all of them,
// or those of runID.
func (r *Reapers) atRiskQueued(ctx context.Context, now time.Time, th Thresholds, runID int64, out *AtRiskReport) error {
	var stale []store.StaleQueued
	var err error
	if runID == 0 {
		stale, err = r.cfg.Store.ListStaleQueued(ctx, now, 0, th.AgentLost, r.cfg.Batch, false)
	} else {
		stale, err = r.cfg.Store.RunQueued(ctx, runID, now, th.AgentLost)
	}
	if err != nil {
		return err
	}
	for _, c := range stale {
		if c.Covered {
			continue
		}
		p := r.dispatchLostPlan(c, th, now)
		missing := c.Missing
		if missing == nil {
			missing = []string{}
		}
		tags := c.RequiredTags
		if tags == nil {
			tags = []string{}
		}
		out.Queued = append(out.Queued, AtRiskQueued{
			RunID: c.RunID, TIID: c.TIID, TaskID: c.TaskID, TryNumber: c.TryNumber, QueuedAt: c.QueuedAt,
			Queued: c.Age, RequiredTags: tags, MissingTags: missing, ActiveAgents: c.ActiveAgents,
			TimeLeft: max(th.DispatchLost-c.Age, 0), Outcome: p.Message,
		})
	}
	return nil
}

// atRiskGrace reports what would hold the heartbeat-based reapers back:
// the post-leadership grace, or on a follower that it is unknown, and the
// last mass-silence brake verdict.
func (r *Reapers) atRiskGrace(_ context.Context, now time.Time, term *Term, th Thresholds, out *AtRiskReport) {
	if term == nil {
		out.Grace = append(out.Grace, GraceNotice{Reaper: state.ReaperAgentLost,
			Message: "this replica does not lead: the leader's post-leadership grace is not known here"})
		return
	}
	if g := graceNotice("agent-lost", now, *term, th); g != "" {
		out.Grace = append(out.Grace, GraceNotice{Reaper: state.ReaperAgentLost, Message: g})
	}
	if b := r.Brake(); b.Engaged {
		out.Grace = append(out.Grace, GraceNotice{Reaper: state.ReaperAgentLost, Message: b.Message})
	}
}

package reaper

import (
	"context"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// RunHorizon is how far ahead AtRisk looks for run timeout deadlines.
const RunHorizon = 15 * time.Minute

// AtRisk lists the work a reaper will act on if nothing changes, with the
// time left before it does (GET /v1/at-risk, vigil at-risk, the console's
// At risk page; docs/scheduler-resilience.md "Work at risk"). It reuses
// the reapers' candidate queries and decisions at earlier horizons:
//   - agent-lost's query with a threshold of two heartbeat intervals lists
//     running TIs whose heartbeat is overdue by more than one interval,
//     and LostAttempt says what the reaper would decide;
//   - dispatch-lost's query with a zero threshold lists every queued TI no
//     active agent can take, and its plan says why;
//   - run-timeout's query at now + RunHorizon lists runs nearing their
//     deadline.
//
// term is the leader's (nil on a follower, whose grace is unknown); any
// grace or brake that would hold a reaper back is reported in Grace.
// hbInterval is the agents' heartbeat interval. It writes nothing.
func (r *Reapers) AtRisk(ctx context.Context, term *Term, hbInterval time.Duration) (protocol.AtRisk, error) {
	now, err := r.cfg.Clock.Now(ctx)
	if err != nil {
		return protocol.AtRisk{}, fmt.Errorf("reaper clock: %w", err)
	}
	th := r.cfg.Thresholds()
	out := protocol.AtRisk{
		Now: now, HeartbeatInterval: protocol.Duration(hbInterval), RunHorizon: protocol.Duration(RunHorizon),
		Thresholds: protocol.Thresholds{AgentLost: protocol.Duration(th.AgentLost),
			DispatchLost: protocol.Duration(th.DispatchLost), Orphan: protocol.Duration(th.Orphan)},
		Running: []protocol.AtRiskRunning{}, Queued: []protocol.AtRiskQueued{}, Runs: []protocol.AtRiskRun{},
	}
	if err := r.atRiskRunning(ctx, now, th, hbInterval, &out); err != nil {
		return out, err
	}
	if err := r.atRiskQueued(ctx, now, th, &out); err != nil {
		return out, err
	}
	runs, err := r.cfg.Store.ListTimedOutRuns(ctx, now.Add(RunHorizon), r.cfg.Batch)
	if err != nil {
		return out, err
	}
	for _, c := range runs {
		out.Runs = append(out.Runs, protocol.AtRiskRun{RunID: c.RunID, DAGID: c.DAGID, State: string(c.State),
			Timeout: protocol.Duration(c.Timeout), Deadline: c.Deadline, TimeLeft: protocol.Duration(max(c.Deadline.Sub(now), 0))})
	}
	r.atRiskGrace(ctx, now, term, th, &out)
	return out, nil
}

func (r *Reapers) atRiskRunning(ctx context.Context, now time.Time, th Thresholds, hb time.Duration, out *protocol.AtRisk) error {
	stale, err := r.cfg.Store.ListStaleRunning(ctx, now, 2*hb, r.cfg.Batch)
	if err != nil {
		return err
	}
	for _, c := range stale {
		silent := fmt.Sprintf("agent %s silent for %s (threshold %s)", agentName(c.AgentID), c.Age.Round(time.Second), th.AgentLost)
		reap := LostAttempt(c, silent)
		out.Running = append(out.Running, protocol.AtRiskRunning{
			RunID: c.RunID, TIID: c.TIID, TaskID: c.TaskID, TryNumber: c.TryNumber, AgentID: c.AgentID, Started: c.Started,
			LastHeartbeatAt: c.LastHeartbeatAt, Silent: protocol.Duration(c.Age), Overdue: protocol.Duration(c.Age - hb),
			TimeLeft: protocol.Duration(max(th.AgentLost-c.Age, 0)), Decision: string(reap.EventKind), Outcome: reap.Message,
		})
	}
	return nil
}

func (r *Reapers) atRiskQueued(ctx context.Context, now time.Time, th Thresholds, out *protocol.AtRisk) error {
	stale, err := r.cfg.Store.ListStaleQueued(ctx, now, 0, th.AgentLost, r.cfg.Batch, false)
	if err != nil {
		return err
	}
	activeSince := now.Add(-th.AgentLost)
	for _, c := range stale {
		p := r.dispatchLostPlan(c, th, activeSince)
		missing := c.Missing
		if missing == nil {
			missing = []string{}
		}
		tags := c.RequiredTags
		if tags == nil {
			tags = []string{}
		}
		out.Queued = append(out.Queued, protocol.AtRiskQueued{
			RunID: c.RunID, TIID: c.TIID, TaskID: c.TaskID, TryNumber: c.TryNumber, QueuedAt: c.QueuedAt,
			Queued: protocol.Duration(c.Age), RequiredTags: tags, MissingTags: missing, ActiveAgents: c.ActiveAgents,
			TimeLeft: protocol.Duration(max(th.DispatchLost-c.Age, 0)), Outcome: p.Message,
		})
	}
	return nil
}

// atRiskGrace reports what would hold the heartbeat-based reapers back:
// the post-leadership grace, or on a follower that it is unknown, and the
// last mass-silence brake verdict.
func (r *Reapers) atRiskGrace(_ context.Context, now time.Time, term *Term, th Thresholds, out *protocol.AtRisk) {
	if term == nil {
		out.Grace = append(out.Grace, protocol.GraceNotice{Reaper: string(state.ReaperAgentLost),
			Message: "this replica does not lead: the leader's post-leadership grace is not known here"})
		return
	}
	if g := graceNotice("agent-lost", now, *term, th); g != "" {
		out.Grace = append(out.Grace, protocol.GraceNotice{Reaper: string(state.ReaperAgentLost), Message: g})
	}
	if b := r.Brake(); b.Engaged {
		out.Grace = append(out.Grace, protocol.GraceNotice{Reaper: string(state.ReaperAgentLost), Message: b.Message})
	}
}

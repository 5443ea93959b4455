package reaper

import (
	"context"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// planDispatchLost is the dispatch-lost reaper (docs/design.md §6 row 2; Leoflow
// scheduler-resilience; Strøm phase 4 tag check).
//
// Signal: state queued with queued_at set and older than the threshold
// (a TI without the stamp is too poorly observed to reap), and no active
// agent (heartbeat within the agent-lost threshold) whose tags cover the
// TI's required tags. Action: fail with dispatch_lost, naming the missing
// tags; no retry, since nothing could run it. A backlog (matching agents
// live but busy, or the TI's task pool full) is left alone: no decision
// and no event; its size and age per pool are the gauges
// vigil_dispatch_backlog_tasks and vigil_dispatch_backlog_oldest_seconds,
// set once per pass, and a dry run
// lists its TIs as dispatch_lost_deferred.
//
// "Active" is judged from agent heartbeats, which an outage of the control
// plane also stops; so the reaper shares the agent-lost reaper's
// post-leadership grace and waits until agents have had a full agent-lost
// threshold to reconnect before concluding that none is alive.
func (r *Reapers) planDispatchLost(ctx context.Context, now time.Time, term Term, th Thresholds) ([]plan, string, error) {
	if grace := graceNotice("dispatch-lost", now, term, th); grace != "" {
		return nil, grace, nil
	}
	held, notice, err := r.holdForSilence(ctx, state.ReaperDispatchLost, now, term, th)
	if err != nil || held {
		return nil, notice, err
	}
	// Only the uncoverable TIs, filtered before the LIMIT: a covered
	// backlog queued ahead of them never hides them.
	stale, err := r.cfg.Store.ListStaleQueued(ctx, now, th.DispatchLost, th.AgentLost, r.cfg.Batch, false)
	if err != nil {
		return nil, "", err
	}
	if len(stale) < r.cfg.Batch { // the pass's last page: measure the backlog once
		r.measureBacklog(ctx, now, th)
	}
	plans := make([]plan, 0, len(stale))
	for _, c := range stale {
		plans = append(plans, r.dispatchLostPlan(c, th, now))
	}
	return plans, notice, nil
}

// dispatchLostPlan is the plan for one listed TI at now (the database
// clock): report-only when an active agent covers it, else a reap whose
// write guard (NoCoverSince) counts an agent as active when it
// heartbeated within the agent-lost threshold of now.
func (r *Reapers) dispatchLostPlan(c store.StaleQueued, th Thresholds, now time.Time) plan {
	cand := Candidate{
		Reaper: state.ReaperDispatchLost, RunID: c.RunID, TIID: ptr(c.TIID), TaskID: c.TaskID, TryNumber: c.TryNumber,
		Signal: "queued_at", SignalAt: c.QueuedAt, Age: c.Age,
	}
	queuedFor := fmt.Sprintf("queued for %s (threshold %s)", c.Age.Round(time.Second), th.DispatchLost)
	if c.Covered { // listed by dry runs only; never written or counted
		cand.Decision = metrics.DecisionDispatchLostDeferred
		cand.Message = fmt.Sprintf("%s but an active agent offers tags %v: a backlog, left alone", queuedFor, c.RequiredTags)
		return plan{Candidate: cand}
	}
	cand.Decision = metrics.DecisionDispatchLost
	// An if chain, not a tagless switch, so that the mutation run can
	// test the conditions (see LostAttempt).
	cand.Message = fmt.Sprintf("%s and no single active agent offers all of the required tags %v", queuedFor, c.RequiredTags)
	if c.ActiveAgents == 0 {
		cand.Message = fmt.Sprintf("%s and no agent is active (none heartbeated within %s); required tags %v",
			queuedFor, th.AgentLost, c.RequiredTags)
	} else if len(c.Missing) > 0 {
		cand.Message = fmt.Sprintf("%s and no active agent offers tags %v (required %v); nothing could run it",
			queuedFor, c.Missing, c.RequiredTags)
	}
	reap := store.Reap{
		TIID: c.TIID, RunID: c.RunID, TaskID: c.TaskID, TryNumber: c.TryNumber,
		State: state.TIFailed, Reason: state.ReasonDispatchLost, Message: cand.Message, EventKind: state.EventKind(cand.Decision),
		WhereState: state.TIQueued, WhereStamp: c.QueuedAt, StampColumn: store.StampQueued,
		NoCoverSince: now.Add(-th.AgentLost),
	}
	return plan{Candidate: cand, reap: &reap}
}

// measureBacklog sets the backlog gauges, per task pool, from one read; a
// failed read leaves them as they were and is logged. A TI waiting only
// for a slot of its pool is covered by an active agent, so it counts here
// and is never reaped dispatch_lost (docs/pools.md).
func (r *Reapers) measureBacklog(ctx context.Context, now time.Time, th Thresholds) {
	pools, err := r.cfg.Store.StaleBacklog(ctx, now, th.DispatchLost, th.AgentLost)
	if err != nil {
		r.log.Warn("dispatch backlog gauge not updated", "err", err)
		return
	}
	tasks, oldest := r.cfg.Metrics.DispatchBacklog, r.cfg.Metrics.DispatchBacklogOldest
	tasks.Reset()
	oldest.Reset()
	tasks.WithLabelValues("").Set(0)
	oldest.WithLabelValues("").Set(0)
	for _, p := range pools {
		tasks.WithLabelValues(p.Pool).Set(float64(p.Count))
		oldest.WithLabelValues(p.Pool).Set(now.Sub(p.Oldest).Seconds())
	}
}

// dispatchBacklogPlans lists up to limit TIs of the covered backlog as
// report-only dispatch_lost_deferred candidates, for a dry run.
func (r *Reapers) dispatchBacklogPlans(ctx context.Context, now time.Time, th Thresholds, limit int) ([]plan, error) {
	backlog, err := r.cfg.Store.ListStaleQueued(ctx, now, th.DispatchLost, th.AgentLost, limit, true)
	if err != nil {
		return nil, err
	}
	plans := make([]plan, 0, len(backlog))
	for _, c := range backlog {
		plans = append(plans, r.dispatchLostPlan(c, th, now))
	}
	return plans, nil
}

package reaper

import (
	"context"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// planAgentLost is the TI heartbeat reaper (docs/design.md §6 row 1; Leoflow
// scheduler-resilience; KiCI/horsies never-started vs started).
//
// Signal: state running, last_heartbeat_at set (a claim is the first
// heartbeat) and older than the threshold. Post-leadership grace: nothing
// is reaped until this leader has led, with the database reachable, for
// the threshold, so a control-plane outage (restart, database outage,
// failover) never fails tasks whose agents could not report during it
// (Leoflow #896).
//
// Action: a started TI fails with agent_lost (retries apply); a TI that
// never started is requeued to scheduled without spending a retry, and
// fails with dispatch_lost after MaxDispatchAttempts.
func (r *Reapers) planAgentLost(ctx context.Context, now time.Time, term Term, th Thresholds) ([]plan, string, error) {
	if grace := graceNotice("agent-lost", now, term, th); grace != "" {
		return nil, grace, nil
	}
	held, notice, err := r.holdForSilence(ctx, state.ReaperAgentLost, now, term, th)
	if err != nil || held {
		return nil, notice, err
	}
	stale, err := r.cfg.Store.ListStaleRunning(ctx, now, agentLostHorizon(th.AgentLost), r.cfg.Batch)
	if err != nil {
		return nil, "", err
	}
	plans := make([]plan, 0, len(stale))
	for _, c := range stale {
		plans = append(plans, r.agentLostPlan(c, th))
	}
	return plans, notice, nil
}

func (r *Reapers) agentLostPlan(c store.StaleRunning, th Thresholds) plan {
	silent := fmt.Sprintf("agent %s silent for %s (threshold %s)", agentName(c.AgentID), c.Age.Round(time.Second), th.AgentLost)
	reap := LostAttempt(c, silent)
	return plan{
		Candidate: Candidate{
			Reaper: state.ReaperAgentLost, Decision: string(reap.EventKind), RunID: c.RunID, TIID: ptr(c.TIID), TaskID: c.TaskID,
			TryNumber: c.TryNumber, AgentID: c.AgentID, Signal: "last_heartbeat_at", SignalAt: c.LastHeartbeatAt,
			Age: c.Age, Message: reap.Message,
		},
		reap: &reap,
	}
}

// LostAttempt decides what happens to a running attempt whose agent is
// gone, given why (the message prefix): a started TI fails with
// agent_lost (retries apply); a never-started one is requeued without
// spending a try, or fails dispatch_lost after MaxDispatchAttempts (KiCI,
// horsies: never-started work is safe to requeue, started work is not).
// The returned Reap is guarded by the listed heartbeat and attempt.
func LostAttempt(c store.StaleRunning, why string) store.Reap {
	silent := why
	reap := store.Reap{
		TIID: c.TIID, RunID: c.RunID, TaskID: c.TaskID, TryNumber: c.TryNumber, AttemptID: c.AttemptID, AgentID: c.AgentID,
		WhereState: state.TIRunning, WhereStamp: c.LastHeartbeatAt, StampColumn: store.StampHeartbeat,
	}
	// An if chain, not a tagless switch: Go's coverage gives a case
	// condition no block, so the mutation run could not test it
	// (docs/reliability.md, "Mutation score").
	if !c.Started && c.DispatchAttempts+1 >= MaxDispatchAttempts {
		reap.State, reap.Reason, reap.EventKind = state.TIFailed, state.ReasonDispatchLost, state.EventDispatchLost
		reap.Message = fmt.Sprintf("%s and the task never started; dispatched %d times without starting, giving up",
			silent, c.DispatchAttempts+1)
		return reap
	}
	if !c.Started {
		reap.State, reap.Reason, reap.EventKind, reap.Requeue = state.TIScheduled, state.ReasonAgentLost, state.EventAgentLostRequeued, true
		reap.Message = fmt.Sprintf("%s before the task started; requeued without spending a retry (dispatch attempt %d of %d)",
			silent, c.DispatchAttempts+1, MaxDispatchAttempts)
		return reap
	}
	reap.Reason, reap.EventKind = state.ReasonAgentLost, state.EventAgentLost
	failTry(&reap, c, silent)
	return reap
}

// failTry sets reap to fail the listed try: up_for_retry while c's retry
// budget remains, else failed, with a message that says which.
func failTry(reap *store.Reap, c store.StaleRunning, why string) {
	if ok, delay := c.Policy.Next(c.TryNumber); ok {
		reap.State, reap.RetryDelay = state.TIUpForRetry, delay
		reap.Message = fmt.Sprintf("%s; try %d failed, retry in %s", why, c.TryNumber, delay)
		return
	}
	reap.State = state.TIFailed
	reap.Message = fmt.Sprintf("%s; try %d failed, no retries left", why, c.TryNumber)
}

func agentName(id *int64) string {
	if id == nil {
		return "(unknown)"
	}
	return fmt.Sprint(*id)
}

// graceNotice explains why a reaper that judges liveness from heartbeats
// holds back, or returns "" once this leader has led, with the database
// reachable, for the agent-lost threshold (docs/design.md §6 post-leadership grace).
func graceNotice(reaper state.Reaper, now time.Time, term Term, th Thresholds) string {
	if gap := now.Sub(term.CheckedAt); term.MaxGap > 0 && gap > term.MaxGap {
		return fmt.Sprintf("%s reaper holding back: %s passed since the leader last checked for a stall (limit %s); the grace restarts first",
			reaper, gap.Round(time.Millisecond), term.MaxGap)
	}
	led := now.Sub(term.GraceStart)
	if led >= th.AgentLost {
		return ""
	}
	return fmt.Sprintf("%s reaper in post-leadership grace: leading with the database reachable for %s of %s (reaping resumes at %s)",
		reaper, led.Round(time.Second), th.AgentLost, term.GraceStart.Add(th.AgentLost).UTC().Format(time.RFC3339))
}

package reaper

import (
	"context"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// planExecutionTimeouts is the server-side execution-timeout backstop
// (docs/design.md §7; Strøm phase 2). The agent enforces execution_timeout itself
// by killing the process group; this catches an agent that failed to.
//
// Signal: state running, started_at set, and started_at +
// execution_timeout + the agent-lost threshold before now (the extra
// threshold leaves the agent time to kill and report). It shares the
// post-leadership grace, since the agent's own timeout report may be
// waiting in its outage buffer. Action: fail with execution_timeout,
// retries apply; the agent is told to stop at its next heartbeat.
func (r *Reapers) planExecutionTimeouts(ctx context.Context, now time.Time, term Term, th Thresholds) ([]plan, string, error) {
	if grace := graceNotice("execution-timeout", now, term, th); grace != "" {
		return nil, grace, nil
	}
	overdue, err := r.cfg.Store.ListOverdueRunning(ctx, now, th.AgentLost, r.cfg.Batch)
	if err != nil {
		return nil, "", err
	}
	plans := make([]plan, 0, len(overdue))
	for _, c := range overdue {
		what := fmt.Sprintf("running for %s, past its execution_timeout %s plus %s for its agent to act",
			c.Age.Round(time.Second), c.ExecutionTimeout, th.AgentLost)
		reap := store.Reap{
			TIID: c.TIID, RunID: c.RunID, TaskID: c.TaskID, TryNumber: c.TryNumber, AttemptID: c.AttemptID, AgentID: c.AgentID,
			Reason: state.ReasonExecutionTimeout, EventKind: state.EventExecutionTimeout,
			WhereState: state.TIRunning, WhereStamp: c.StartedAt, StampColumn: store.StampStarted,
		}
		failTry(&reap, c.StaleRunning, what)
		plans = append(plans, plan{
			Candidate: Candidate{
				Reaper: state.ReaperExecutionTimeout, Decision: string(reap.EventKind), RunID: c.RunID, TIID: ptr(c.TIID),
				TaskID: c.TaskID, TryNumber: c.TryNumber, AgentID: c.AgentID, Signal: "started_at",
				SignalAt: c.StartedAt, Age: c.Age, Message: reap.Message,
			},
			reap: &reap,
		})
	}
	return plans, "", nil
}

// planRunTimeouts cancels runs past their DAG's timeout (docs/design.md §7; Strøm
// phase 3). Signal: state queued or running, timeout set, and start (or
// queue) time + timeout before now. Action: the run and its non-terminal
// TIs become cancelled with reason run_timeout; agents running its TIs are
// told to stop at their next heartbeat and kill the process group.
func (r *Reapers) planRunTimeouts(ctx context.Context, now time.Time, _ Term, _ Thresholds) ([]plan, string, error) {
	runs, err := r.cfg.Store.ListTimedOutRuns(ctx, now, r.cfg.Batch)
	if err != nil {
		return nil, "", err
	}
	plans := make([]plan, 0, len(runs))
	for _, c := range runs {
		msg := fmt.Sprintf("run exceeded its timeout of %s (%s since it %s)", c.Timeout,
			now.Sub(c.Since).Round(time.Second), map[bool]string{true: "started", false: "was queued"}[c.State == state.RunRunning])
		plans = append(plans, plan{
			Candidate: Candidate{
				Reaper: state.ReaperRunTimeout, Decision: metrics.DecisionRunTimeout, RunID: c.RunID, Signal: "timeout_deadline",
				SignalAt: c.Deadline, Age: c.Overdue, Message: msg,
			},
			apply: func(ctx context.Context, epoch int64) (bool, error) {
				return r.cfg.Store.TimeoutRun(ctx, epoch, c, now, msg)
			},
		})
	}
	return plans, "", nil
}

// planInactiveAgents marks agents silent past the agent-lost threshold as
// inactive (docs/design.md §7; Strøm phase 1). Their running TIs are left to the
// agent-lost reaper; their next heartbeat or claim reactivates them. It
// shares the post-leadership grace: an outage silences every agent.
func (r *Reapers) planInactiveAgents(ctx context.Context, now time.Time, term Term, th Thresholds) ([]plan, string, error) {
	if grace := graceNotice("agent-inactive", now, term, th); grace != "" {
		return nil, grace, nil
	}
	agents, err := r.cfg.Store.ListStaleAgents(ctx, now, th.AgentLost, r.cfg.Batch)
	if err != nil {
		return nil, "", err
	}
	plans := make([]plan, 0, len(agents))
	for _, c := range agents {
		plans = append(plans, plan{
			Candidate: Candidate{
				Reaper: state.ReaperAgentInactive, Decision: metrics.DecisionAgentInactive, AgentID: ptr(c.AgentID),
				Signal: "agent_last_heartbeat_at", SignalAt: c.LastHeartbeatAt, Age: c.Age,
				Message: fmt.Sprintf("agent %s (%d) silent for %s (threshold %s), %d running task instance(s): marked inactive",
					c.Name, c.AgentID, c.Age.Round(time.Second), th.AgentLost, c.Running),
			},
			agent: &c,
		})
	}
	return plans, "", nil
}

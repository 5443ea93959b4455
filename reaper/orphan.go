package reaper

import (
	"context"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/state"
)

// planOrphans is the orphan-run reaper (docs/design.md §6 row 3; Leoflow
// scheduler-resilience; horsies workflow recovery).
//
// Signal: run state running, no TI in scheduled, queued, running or
// up_for_retry, and nothing changed in the run or its TIs for the
// threshold. Action: finalize through the normal path when every TI is
// terminal (orphan_finalized); otherwise fail its 'none' TIs and the run
// with reason orphaned (orphan_reaped).
func (r *Reapers) planOrphans(ctx context.Context, now time.Time, _ Term, th Thresholds) ([]plan, string, error) {
	runs, err := r.cfg.Store.ListOrphanRuns(ctx, now, th.Orphan, r.cfg.Batch)
	if err != nil {
		return nil, "", err
	}
	plans := make([]plan, 0, len(runs))
	for _, c := range runs {
		cand := Candidate{
			Reaper: state.ReaperOrphan, RunID: c.RunID, Signal: "last_change", SignalAt: c.LastChange, Age: c.Age,
		}
		idle := fmt.Sprintf("run unchanged for %s (threshold %s) with no active task instance", c.Age.Round(time.Second), th.Orphan)
		if c.AllTerminal {
			cand.Decision = metrics.DecisionOrphanFinalized
			cand.Message = idle + "; every task instance is terminal: finalized"
		} else {
			cand.Decision = metrics.DecisionOrphanReaped
			cand.Message = fmt.Sprintf("%s; %d task instance(s) could never be scheduled: failed as orphaned", idle, c.Pending)
		}
		c := c
		plans = append(plans, plan{Candidate: cand, apply: func(ctx context.Context, epoch int64) (bool, error) {
			ended, err := r.cfg.Store.FinalizeOrphan(ctx, epoch, c, cand.Message)
			return ended != "", err
		}})
	}
	return plans, "", nil
}

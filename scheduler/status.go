package scheduler

import "github.com/vigil-sched/vigil/reaper"

// Report is what this replica publishes about its scheduler for the
// Cluster page: the decision counters always, and while it leads its
// reapers' last sweeps, the post-leadership grace (docs/design.md §6) and
// the mass-silence brake.
func (s *Scheduler) Report() reaper.Status {
	rep := reaper.Status{Reapers: []reaper.Sweep{}, Decisions: s.cfg.Metrics.DecisionCounts()}
	if !s.leading.Load() {
		return rep
	}
	rep.Reapers = s.reapers.LastSweeps()
	if t := s.currentTerm(); t != nil {
		start, ends := t.GraceStart, t.GraceStart.Add(s.Thresholds().AgentLost)
		rep.GraceStart, rep.GraceEnds = &start, &ends
	}
	b := s.reapers.Brake()
	rep.BrakeEngaged, rep.BrakeMessage = b.Engaged, b.Message
	return rep
}

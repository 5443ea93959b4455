// Package trigger decides, from the states of a task instance's direct
// upstreams, whether its trigger rule lets it run, makes it wait, or ends
// it skipped or upstream_failed (docs/trigger-rules.md). The semantics are
// Airflow's (airflow/ti_deps/deps/trigger_rule_dep.py): a rule that can
// still be met waits; one that can never be met decides at once, without
// waiting for the other upstreams, exactly where Airflow does.
//
// The decision is a pure function of Counts, so it is tested by tables;
// the store's SQL scheduler evaluates the same function through Seen, the
// few facts about the upstreams it depends on, and Table, its value for
// every combination of them.
package trigger

import "github.com/vigil-sched/vigil/state"

// Rule is a task's trigger_rule: when its upstreams' states let it run.
type Rule string

// Trigger rules, Airflow's names and meanings. "Failed" counts a failed or
// cancelled upstream; "done" is any terminal state.
const (
	// AllSuccess, the default: every upstream succeeded. A failed or
	// upstream_failed upstream ends the TI upstream_failed, else a skipped
	// one ends it skipped, each as soon as it is seen.
	AllSuccess Rule = "all_success"
	// AllFailed: every upstream failed or is upstream_failed; a success or
	// skip ends the TI skipped.
	AllFailed Rule = "all_failed"
	// AllDone: every upstream is done, whatever its state.
	AllDone Rule = "all_done"
	// AllSkipped: every upstream was skipped; any other end skips the TI.
	AllSkipped Rule = "all_skipped"
	// OneSuccess: runs at the first upstream success; when all are done
	// without one it ends skipped (all skipped) or upstream_failed.
	OneSuccess Rule = "one_success"
	// OneFailed: runs at the first failed or upstream_failed upstream;
	// skipped when all are done without one.
	OneFailed Rule = "one_failed"
	// OneDone: runs at the first upstream success or failure (not a skip,
	// not upstream_failed); skipped when all are done without one.
	OneDone Rule = "one_done"
	// NoneFailed: every upstream succeeded or was skipped; a failed or
	// upstream_failed upstream ends the TI upstream_failed at once.
	NoneFailed Rule = "none_failed"
	// NoneFailedMinOneSuccess: as NoneFailed, but skipped when every
	// upstream was skipped.
	NoneFailedMinOneSuccess Rule = "none_failed_min_one_success"
	// NoneSkipped: every upstream is done and none was skipped; a skipped
	// upstream ends the TI skipped at once.
	NoneSkipped Rule = "none_skipped"
	// Always: runs at once, without waiting for its upstreams.
	Always Rule = "always"
)

// Default is the rule of a task that names none.
const Default = AllSuccess

// Rules lists every trigger rule, in Airflow's documentation order.
func Rules() []Rule {
	return []Rule{AllSuccess, AllFailed, AllDone, AllSkipped, OneSuccess, OneFailed, OneDone,
		NoneFailed, NoneFailedMinOneSuccess, NoneSkipped, Always}
}

// Valid reports whether r is one of Rules (the empty rule is not; a spec
// fills in Default before it is stored).
func (r Rule) Valid() bool {
	for _, x := range Rules() {
		if r == x {
			return true
		}
	}
	return false
}

// Counts are the states of one TI's direct upstreams.
type Counts struct {
	Upstream       int // direct upstreams, done or not
	Success        int
	Skipped        int
	Failed         int // failed or cancelled
	UpstreamFailed int
}

// Done is the number of upstreams in a terminal state.
func (c Counts) Done() int { return c.Success + c.Skipped + c.Failed + c.UpstreamFailed }

// Add counts one upstream in state s: any state that is not terminal is
// pending.
func (c *Counts) Add(s state.TI) {
	c.Upstream++
	switch s {
	case state.TISuccess:
		c.Success++
	case state.TISkipped:
		c.Skipped++
	case state.TIFailed, state.TICancelled:
		c.Failed++
	case state.TIUpstreamFailed:
		c.UpstreamFailed++
	}
}

// Decision is what the scheduler does with a TI that is still none.
type Decision string

// Decisions.
const (
	Wait           Decision = "wait"            // the rule may still be met: leave it none
	Run            Decision = "run"             // the rule is met: schedule it
	Skip           Decision = "skip"            // the rule can never be met: skipped
	UpstreamFailed Decision = "upstream_failed" // the rule can never be met: upstream_failed
)

// Decisions lists every decision.
func Decisions() []Decision { return []Decision{Wait, Run, Skip, UpstreamFailed} }

// State is the terminal TI state a Skip or UpstreamFailed decision ends
// in; "" for Wait and Run.
func (d Decision) State() state.TI {
	switch d {
	case Skip:
		return state.TISkipped
	case UpstreamFailed:
		return state.TIUpstreamFailed
	}
	return ""
}

// Decide applies rule r to the upstream counts c. A TI without upstreams
// runs whatever its rule, as in Airflow; an unknown rule is treated as
// AllSuccess (validation refuses one before it can be stored). Decide
// never returns Wait once every upstream is done.
func Decide(r Rule, c Counts) Decision {
	if c.Upstream == 0 || r == Always {
		return Run
	}
	failed := c.Failed + c.UpstreamFailed
	all := c.Done() == c.Upstream
	switch r {
	case AllFailed:
		switch {
		case c.Success+c.Skipped > 0:
			return Skip
		case all:
			return Run
		}
	case AllDone:
		if all {
			return Run
		}
	case AllSkipped:
		switch {
		case c.Success+failed > 0:
			return Skip
		case all:
			return Run
		}
	case OneSuccess:
		switch {
		case c.Success > 0:
			return Run
		case all && c.Skipped == c.Upstream:
			return Skip
		case all:
			return UpstreamFailed
		}
	case OneFailed:
		switch {
		case failed > 0:
			return Run
		case all:
			return Skip
		}
	case OneDone:
		switch {
		case c.Success+c.Failed > 0:
			return Run
		case all:
			return Skip
		}
	case NoneFailed, NoneFailedMinOneSuccess:
		switch {
		case failed > 0:
			return UpstreamFailed
		case r == NoneFailedMinOneSuccess && c.Skipped == c.Upstream:
			return Skip
		case all:
			return Run
		}
	case NoneSkipped:
		switch {
		case c.Skipped > 0:
			return Skip
		case all:
			return Run
		}
	default: // AllSuccess
		switch {
		case failed > 0:
			return UpstreamFailed
		case c.Skipped > 0:
			return Skip
		case all:
			return Run
		}
	}
	return Wait
}

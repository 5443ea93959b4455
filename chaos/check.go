package chaos

import (
	"fmt"
	"slices"
	"time"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/state"
)

// The invariants the checker asserts (docs/reliability.md, "Invariants").
const (
	InvNoLiveFailed  = "1 no live execution failed"
	InvSLA           = "2 SLA"
	InvFencing       = "3 fencing"
	InvNoLostSuccess = "4 no lost completion"
	InvLogs          = "5 logs"
	InvLiveness      = "6 liveness"
	InvNoDuplicate   = "7 no duplicate execution"
)

// Violation is one breach of an invariant, with where to look.
type Violation struct {
	Invariant string
	At        time.Time
	Subject   string // the attempt, TI, run, event or epoch concerned
	Detail    string
}

// Result is one invariant's verdict: how many cases it judged and which
// of them broke it.
type Result struct {
	Invariant  string
	Checked    int
	Excluded   int // cases out of the invariant's scope, with the reason in Notes
	Violations []Violation
	Notes      []string
}

// Verdict is the checker's whole output.
type Verdict struct {
	Results     []Result
	ReapLatency []time.Duration // reap time minus the start of the stuck period's eligibility
	RunLatency  []time.Duration // terminal time minus the last fault's end, runs live then
	Failovers   []Failover
	ReapedAlive []ReapedAlive
	Skews       []SkewSeen
}

// Violations returns every violation of every invariant.
func (v Verdict) Violations() []Violation {
	var out []Violation
	for _, r := range v.Results {
		out = append(out, r.Violations...)
	}
	return out
}

// Check judges h against the seven invariants, the harness's own
// (InvOneProcess) and the schedule's (InvSlots).
func Check(h *History) Verdict {
	var v Verdict
	v.Results = append(v.Results, checkNoLiveFailed(h))
	sla, reaps, runs := checkSLA(h)
	v.Results = append(v.Results, sla)
	v.ReapLatency, v.RunLatency = reaps, runs
	live, fo := checkLiveness(h)
	v.Results = append(v.Results, checkFencing(h, fo))
	v.Results = append(v.Results, checkNoLostSuccess(h))
	v.Results = append(v.Results, checkLogs(h))
	v.Results = append(v.Results, live)
	v.Failovers = fo
	dup, alive := checkNoDuplicate(h)
	v.Results = append(v.Results, dup)
	v.ReapedAlive = alive
	v.Results = append(v.Results, checkProcesses(h))
	v.Results = append(v.Results, checkSlots(h))
	v.Skews = skewsSeen(h)
	return v
}

// indexes the checker shares.
type index struct {
	exec     map[string]*Execution // by attempt id
	ti       map[int64]*TaskInstance
	reaped   map[string]Event // attempt id -> the reaper event that failed or requeued it
	late     map[string]bool  // attempt id -> a late success was accepted or recorded
	timedOut map[string]Event // attempt id -> the execution-timeout backstop's event
	byTI     map[int64][]*Execution
	agentOf  map[string]AgentInstance
}

func newIndex(h *History) index {
	ix := index{exec: map[string]*Execution{}, ti: map[int64]*TaskInstance{}, reaped: map[string]Event{},
		late: map[string]bool{}, timedOut: map[string]Event{}, byTI: map[int64][]*Execution{}, agentOf: map[string]AgentInstance{}}
	for i := range h.Executions {
		e := &h.Executions[i]
		ix.exec[e.AttemptID] = e
		ix.byTI[e.TIID] = append(ix.byTI[e.TIID], e)
	}
	for i := range h.TIs {
		ix.ti[h.TIs[i].ID] = &h.TIs[i]
	}
	for _, e := range h.Events {
		switch e.Kind {
		case metrics.DecisionAgentLost, metrics.DecisionDispatchLost, metrics.DecisionAgentLostRequeued:
			// A requeue is a reaper's decision too: it judged the attempt
			// never started, and its process may yet be alive.
			if e.AttemptID != "" {
				ix.reaped[e.AttemptID] = e
			}
		case metrics.DecisionLateCompletion, metrics.DecisionLateCompletionRecorded:
			ix.late[e.AttemptID] = true
		case metrics.DecisionExecutionTimeout:
			ix.timedOut[e.AttemptID] = e
		}
	}
	for _, a := range h.Agents {
		ix.agentOf[a.Instance] = a
	}
	for _, list := range ix.byTI {
		slices.SortFunc(list, func(a, b *Execution) int { return a.Start.Compare(b.Start) })
	}
	return ix
}

// reaperDecisions are the reapers' decisions that end or requeue an
// attempt: each is judged by invariant 1, and the agent-lost ones by the
// SLA too.
var reaperDecisions = []string{metrics.DecisionAgentLost, metrics.DecisionAgentLostRequeued, metrics.DecisionDispatchLost}

// AckTolerance is how much earlier than the agent-lost threshold after an
// acknowledged heartbeat a reap may commit. Both instants come from the
// database server's one clock: the heartbeat's server_time is now() of
// the transaction that stamped the attempt, the reap's is its commit
// timestamp, and a reaper acts only when its own earlier reading of now()
// is past the stamp by the threshold. So no tolerance is needed but for
// rounding: PostgreSQL keeps microseconds.
const AckTolerance = time.Millisecond

// checkNoLiveFailed: no reaper decision that ends or requeues an attempt
// (agent_lost, agent_lost_requeued, dispatch_lost) commits within the
// agent-lost threshold (less AckTolerance) of a heartbeat the control
// plane acknowledged for that attempt, before or after it. The agent's own
// evidence decides, not the faults: an impairment explains why heartbeats
// stopped, and excuses nothing (docs/reliability.md, invariant 1).
func checkNoLiveFailed(h *History) Result {
	acks := h.acksByAttempt()
	r := Result{Invariant: InvNoLiveFailed}
	least := h.Timing.AgentLost - AckTolerance
	unseen := 0
	for _, ev := range h.Events {
		if !slices.Contains(reaperDecisions, ev.Kind) || ev.AttemptID == "" {
			continue
		}
		r.Checked++
		list := acks[ev.AttemptID]
		if len(list) == 0 {
			unseen++
		}
		for i := len(list) - 1; i >= 0; i-- { // the latest offending ack
			a := list[i]
			if gap := ev.Committed.Sub(a.At); gap < least {
				r.Violations = append(r.Violations, Violation{InvNoLiveFailed, ev.Committed, "attempt " + ev.AttemptID,
					fmt.Sprintf("%s of TI %d (try %d) committed %s after agent %s's heartbeat acknowledged at %s covered it (threshold %s)",
						ev.Kind, ev.TIID, ev.Try, gap.Round(time.Millisecond), a.Instance, a.At.Format(time.RFC3339Nano), h.Timing.AgentLost)})
				break
			}
		}
	}
	if unseen > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d reaped attempts had no acknowledged heartbeat (reaped before their first)", unseen))
	}
	return r
}

// checkSLA: (a) every run live when the last fault cleared is terminal
// within max(threshold) + sweep + 5 s plus its DAG's fault-free duration
// bound; (b) every agent_lost or agent_lost_requeued reap came within
// threshold + sweep + 2 s of the moment its attempt became stuck: the
// latest of its last acknowledged heartbeat (else its claim), the start
// of the reaping leader's term, that leader's last grace restart (a
// leader counts silence only from when it could see agents) and the last
// moment its mass-silence brake held (docs/design.md §6). The bound
// stretches by what a slow database adds to the sweeps meanwhile
// (slowSweepStretch).
func checkSLA(h *History) (Result, []time.Duration, []time.Duration) {
	r := Result{Invariant: InvSLA}
	clear := h.lastClear()
	var runLat, reapLat []time.Duration
	slack := h.Timing.AgentLost + h.Timing.Sweep + 5*time.Second
	for _, run := range h.Runs {
		if !run.Ended.IsZero() && run.Ended.Before(clear) {
			continue
		}
		r.Checked++
		deadline := clear.Add(slack + h.RunBound[run.DAG])
		if run.Created.After(clear) {
			deadline = run.Created.Add(slack + h.RunBound[run.DAG])
		}
		if run.Ended.IsZero() {
			r.Violations = append(r.Violations, Violation{InvSLA, deadline, fmt.Sprintf("run %d", run.ID),
				fmt.Sprintf("run of %s still %s at the end (due by %s)", run.DAG, run.State, deadline.Format(time.RFC3339Nano))})
			continue
		}
		runLat = append(runLat, run.Ended.Sub(clear))
		if run.Ended.After(deadline) {
			r.Violations = append(r.Violations, Violation{InvSLA, run.Ended, fmt.Sprintf("run %d", run.ID),
				fmt.Sprintf("run of %s terminal %s after its deadline", run.DAG, run.Ended.Sub(deadline))})
		}
	}
	acks := h.acksByAttempt()
	claims := map[string]time.Time{}
	for _, ev := range h.Events {
		if ev.Kind == eventClaimed && ev.AttemptID != "" {
			claims[ev.AttemptID] = ev.Committed
		}
	}
	bound := h.Timing.AgentLost + h.Timing.Sweep + 2*time.Second
	unknown := 0
	for _, ev := range h.Events {
		if ev.Kind != metrics.DecisionAgentLost && ev.Kind != metrics.DecisionAgentLostRequeued {
			continue
		}
		due := claims[ev.AttemptID]
		for _, a := range acks[ev.AttemptID] {
			if a.At.Before(ev.Committed) && a.At.After(due) {
				due = a.At
			}
		}
		if due.IsZero() {
			unknown++ // neither claimed nor acknowledged in the history: no start to measure from
			continue
		}
		for _, t := range []time.Time{h.termStart(ev.Epoch), h.graceBefore(ev.Epoch, ev.Committed), h.brakeBefore(ev.Epoch, ev.Committed)} {
			if t.After(due) && t.Before(ev.Committed) {
				due = t
			}
		}
		r.Checked++
		lat := ev.Committed.Sub(due)
		reapLat = append(reapLat, lat)
		allowed := bound + h.slowSweepStretch(due, ev.Committed)
		if lat > allowed {
			r.Violations = append(r.Violations, Violation{InvSLA, ev.Committed, "attempt " + ev.AttemptID,
				fmt.Sprintf("%s %s after it became stuck at %s (bound %s)", ev.Kind, lat.Round(time.Millisecond),
					due.Format(time.RFC3339Nano), allowed)})
		}
	}
	if unknown > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d agent-lost reaps of attempts with no claim event: SLA not measurable (invariant 1 judged them)", unknown))
	}
	return r, reapLat, runLat
}

// eventClaimed is the event a claim writes (store/claim.go).
const eventClaimed = "ti_claimed"

// SweepRoundTrips bounds the database round trips of one reaper sweep
// that reaps an agent's attempts (every reaper's pass: the clock read,
// the list queries, the brake's counts and the fenced batch that writes
// the decisions and their events), counted on cold connections, where
// every statement costs a prepare first. reaper's
// TestSweepRoundTripsBoundTheChaosStretch counts them on a real sweep.
const SweepRoundTrips = 30

// slowSweepStretch is how much later than its bound a DatabaseSlow fault
// can make a reap that became due at from and committed at to. Latency d
// each way makes every round trip 2d longer. Two sweeps stand between the
// moment an attempt becomes eligible and its reap's commit: the one then
// in progress, which read the clock too early, and the next, which reaps;
// each runs at most SweepRoundTrips round trips. A round trip begun in
// the fault's last instant is still delayed whole, so of an overlap o at
// most o/2d + 1 round trips of a sweep are delayed. The stretch is thus,
// for each slow fault, 2 sweeps × min(SweepRoundTrips, o/2d + 1) × 2d
// (docs/reliability.md, invariant 2).
func (h *History) slowSweepStretch(from, to time.Time) time.Duration {
	var total time.Duration
	for _, f := range h.Faults {
		if f.Kind != DatabaseSlow {
			continue
		}
		d, err := time.ParseDuration(f.Detail)
		if err != nil || d <= 0 {
			continue
		}
		lo, hi := f.Start, f.End
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		if !hi.After(lo) {
			continue
		}
		rt := 2 * d
		n := min(int64(SweepRoundTrips), int64(hi.Sub(lo)/rt)+1)
		total += 2 * time.Duration(n) * rt
	}
	return total
}

// graceBefore is the last grace restart that epoch's leader logged
// before t (zero when none).
func (h *History) graceBefore(epoch int64, t time.Time) time.Time {
	holder := h.holderOf(epoch)
	var last time.Time
	for _, g := range h.Graces {
		if g.Replica == holder && g.At.Before(t) && g.At.After(last) {
			last = g.At
		}
	}
	return last
}

// brakeBefore is the last sample before t in which epoch's leader said
// its mass-silence brake held reaping (zero when none): silence counts,
// for the SLA, from when the brake let go.
func (h *History) brakeBefore(epoch int64, t time.Time) time.Time {
	holder := h.holderOf(epoch)
	var last time.Time
	for _, s := range h.Leaders {
		if s.At.Before(t) && slices.Contains(s.Braking, holder) {
			last = s.At
		}
	}
	return last
}

// holderOf is the replica that held the fence at epoch.
func (h *History) holderOf(epoch int64) string {
	for _, f := range h.Fence {
		if f.Epoch == epoch {
			return f.Holder
		}
	}
	return ""
}

// termStart is when the fence moved to epoch (zero when unknown).
func (h *History) termStart(epoch int64) time.Time {
	for _, f := range h.Fence {
		if f.Epoch == epoch {
			return f.Committed
		}
	}
	return time.Time{}
}

// checkNoLostSuccess: an attempt whose journal says it exited 0 while it
// was current (no newer attempt of its TI had started) ends success on its
// TI, or a late success was accepted or recorded for it. Out of scope: an
// attempt whose agent was killed after the task ended, which may have
// taken the unsent completion with it.
func checkNoLostSuccess(h *History) Result {
	ix := newIndex(h)
	r := Result{Invariant: InvNoLostSuccess}
	killed, newer, timedOut := 0, 0, 0
	for i := range h.Executions {
		ex := &h.Executions[i]
		if !ex.HasEnd() || ex.Exit != 0 {
			continue
		}
		if superseded(ix, ex) {
			r.Excluded++
			newer++
			continue
		}
		if to := h.Timeouts[ex.TaskID]; to > 0 && ex.End.Sub(ex.Start) > to {
			r.Excluded++
			timedOut++ // it overran its execution_timeout (its agent was stopped): the timeout decides it
			continue
		}
		if ev, ok := ix.timedOut[ex.AttemptID]; ok && ev.Committed.Before(ex.End) {
			r.Excluded++
			timedOut++ // its agent could not enforce the timeout (stopped); the backstop decided first
			continue
		}
		ti := ix.ti[ex.TIID]
		ok := ti != nil && ti.AttemptID == ex.AttemptID && ti.State == string(state.TISuccess) || ix.late[ex.AttemptID]
		if !ok && diedWithIt(h, ix, ex) {
			r.Excluded++
			killed++
			continue
		}
		r.Checked++
		if !ok {
			st := "missing"
			if ti != nil {
				st = fmt.Sprintf("%s (%s), attempt %s", ti.State, ti.Reason, ti.AttemptID)
			}
			r.Violations = append(r.Violations, Violation{InvNoLostSuccess, ex.End, "attempt " + ex.AttemptID,
				fmt.Sprintf("task %s try %d exited 0 on %s; TI %d is %s and no late success was recorded",
					ex.TaskID, ex.Try, ex.Instance, ex.TIID, st)})
		}
	}
	r.Notes = append(r.Notes, fmt.Sprintf("out of scope: %d successes whose agent never reached the control plane again before it was killed, "+
		"%d that ended after a newer attempt had started, %d that overran their execution timeout or ended after the backstop failed them",
		killed, newer, timedOut))
	return r
}

// diedWithIt reports whether ex's agent was killed before it could have
// reported what ex left behind: after ex ended it never had a reconnect
// bound of uninterrupted ability before its kill (or never became able
// again). A window cut short by the next impairment does not count: a
// completion waits for the log flush, so a quarter second of link
// between the exit and a partition delivers nothing.
func diedWithIt(h *History, ix index, ex *Execution) bool {
	a := ix.agentOf[ex.Instance]
	rb := h.Timing.ReconnectBound()
	back := h.ableAgain(ex.Instance, ex.End)
	if back.IsZero() {
		return true
	}
	for a.Killed {
		if a.Ended.Before(back.Add(rb)) {
			return true
		}
		next, cut := h.nextImpairment(ex.Instance, back, back.Add(rb))
		if !cut {
			return false
		}
		if back = h.ableAgain(ex.Instance, next); back.IsZero() {
			return true
		}
	}
	return false
}

// superseded reports whether another attempt of ex's TI started after ex
// and before ex ended.
func superseded(ix index, ex *Execution) bool {
	for _, o := range ix.byTI[ex.TIID] {
		if o.AttemptID != ex.AttemptID && o.Start.After(ex.Start) && o.Start.Before(ex.End) {
			return true
		}
	}
	return false
}

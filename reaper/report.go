package reaper

import (
	"strings"
	"time"

	"github.com/vigil-sched/vigil/state"
)

// The reapers' own shapes of what they did and would do. Package api
// converts them to the wire's JSON shapes (api/protocol) at its edge;
// durations here are time.Duration.

// Candidate is one item a reaper would act on (a dry run) or did act on (a
// sweep). Signal names the positive observable signal that qualifies it
// (docs/design.md §6) and SignalAt its time; Age is how old the signal is
// on the database clock.
type Candidate struct {
	Reaper    state.Reaper
	Decision  string // the decision label it takes or would take (metrics.Decision*)
	RunID     int64
	TIID      *int64
	TaskID    string
	TryNumber int
	AgentID   *int64
	Signal    string
	SignalAt  time.Time
	Age       time.Duration
	Message   string
	Applied   bool // a sweep: whether the guarded write landed
}

// Report is what a sweep did or a dry run would do. Grace explains, one
// notice per reaper and reason, why a reaper holds back: the leader has
// not yet led for its threshold, or the mass-silence brake is engaged.
type Report struct {
	DryRun     bool
	Grace      []GraceNotice
	Candidates []Candidate // never nil
	Errors     []string
}

// GraceNotice is why one reaper holds back (Report.Grace).
type GraceNotice struct {
	Reaper  state.Reaper
	Message string
}

// AddGrace appends a notice, unless it is empty or repeats the last one (a
// reaper listing page after page gives the same notice for each page).
func (r *Report) AddGrace(n GraceNotice) {
	if n.Message == "" || (len(r.Grace) > 0 && r.Grace[len(r.Grace)-1] == n) {
		return
	}
	r.Grace = append(r.Grace, n)
}

// GraceText is every grace message, one a line; "" when there is none.
func (r Report) GraceText() string {
	lines := make([]string, len(r.Grace))
	for i, n := range r.Grace {
		lines[i] = n.Message
	}
	return strings.Join(lines, "\n")
}

// Sweep is one reaper's last scheduled or forced pass on a leader: when it
// began (database clock), how long it took, what it listed and how many
// writes landed.
type Sweep struct {
	Reaper     state.Reaper
	At         time.Time
	Duration   time.Duration
	Candidates int
	Applied    int
	Errors     int
}

// Status is what a replica's scheduler publishes about recovery for the
// Cluster page: the decision counters always, and while it leads its
// reapers' last sweeps (Reapers never nil), the post-leadership grace
// (GraceStart, GraceEnds = GraceStart + the agent-lost threshold;
// docs/design.md §6) and the mass-silence brake's verdict.
type Status struct {
	Reapers               []Sweep
	Decisions             map[string]int64 // vigil_scheduler_decisions_total by decision since the process started
	GraceStart, GraceEnds *time.Time
	BrakeEngaged          bool
	BrakeMessage          string
}

// AtRiskReport is the work a reaper will act on if nothing changes, with
// the time left before it does, at Now (the database clock); see
// Reapers.AtRisk. Running, Queued and Runs are never nil. Grace says why
// a reaper would hold back now: the time left is then a lower bound.
type AtRiskReport struct {
	Now               time.Time
	HeartbeatInterval time.Duration
	Thresholds        Thresholds
	RunHorizon        time.Duration // runs whose deadline is within it are listed
	Running           []AtRiskRunning
	Queued            []AtRiskQueued
	Runs              []AtRiskRun
	Grace             []GraceNotice
}

// AtRiskRunning is a running TI whose heartbeat is overdue by more than
// one interval: Silent since its last heartbeat, Overdue past the
// interval, TimeLeft before the agent-lost reaper acts, and the decision
// and outcome it would take.
type AtRiskRunning struct {
	RunID           int64
	TIID            int64
	TaskID          string
	TryNumber       int
	AgentID         *int64
	Started         bool
	LastHeartbeatAt time.Time
	Silent          time.Duration
	Overdue         time.Duration
	TimeLeft        time.Duration
	Decision        state.EventKind
	Outcome         string
}

// AtRiskQueued is a queued TI no active agent can take: queued for Queued,
// the tags no active agent offers (MissingTags), and TimeLeft before the
// dispatch-lost reaper fails it.
type AtRiskQueued struct {
	RunID        int64
	TIID         int64
	TaskID       string
	TryNumber    int
	QueuedAt     time.Time
	Queued       time.Duration
	RequiredTags []string
	MissingTags  []string
	ActiveAgents int
	TimeLeft     time.Duration
	Outcome      string
}

// AtRiskRun is a queued or running run whose timeout deadline is within
// AtRiskReport.RunHorizon (TimeLeft 0 once past it).
type AtRiskRun struct {
	RunID    int64
	DAGID    string
	State    state.Run
	Timeout  time.Duration
	Deadline time.Time
	TimeLeft time.Duration
}

package store

import (
	"time"

	"github.com/vigil-sched/vigil/state"
)

// The store's own shapes: what its methods take from agents and return to
// readers. They carry typed states and reasons (package state) and
// time.Duration; the wire protocol (api/protocol) keeps plain strings and
// duration strings, and package api converts between the two at its edge,
// so neither has to change when the other does (adr/0013-state-package.md).

// Attempt names one claim of a task instance: the TI id plus the random
// attempt_id (a UUID) minted by that claim. Only the current attempt may
// heartbeat or complete.
type Attempt struct {
	TIID      int64
	AttemptID string
}

// StopOrder tells an agent to kill the process of an attempt.
type StopOrder struct {
	Attempt
	Reason state.StopReason
}

// Registration is what an agent registers with (Register): its unique
// name, the tags it offers, how many TIs it runs at once (≥ 1), and the
// attempts it is still running after a reconnect.
type Registration struct {
	Name     string
	Tags     []string
	Capacity int
	// InFlight are the attempts the agent still holds, each with its true
	// Started flag, as in a heartbeat.
	InFlight []HeartbeatEntry
	// Credential is the secret an earlier registration of this agent
	// returned, when the agent has one (a reconnect within one process);
	// empty for a new process.
	Credential string
	// StaleAfter is how long a registration must have been silent before
	// another one without its credential may take the name: the agent-lost
	// threshold. 0: any registration may take any name (store tests).
	StaleAfter time.Duration
}

// HeartbeatEntry reports one attempt an agent runs; Started is true once
// its process has been started.
type HeartbeatEntry struct {
	Attempt
	Started bool
}

// ClaimedTask is one TI handed to an agent by Claim, with the task
// definition its run snapshotted at trigger time. The claim counts as its
// first heartbeat.
type ClaimedTask struct {
	Attempt
	RunID     int64
	DAGID     string
	TaskID    string
	TryNumber int // the try this claim starts, from 1
	Command   []string
	Env       map[string]string // the plain values; nil when the task sets none
	// SecretRefs maps each env variable that names a secret to the
	// secret's name; nil: none. The claim's caller resolves them for
	// the claiming agent alone (docs/security.md "Secrets").
	SecretRefs       map[string]string
	ExecutionTimeout time.Duration // 0: none
	// RunType is the run's RunManual, RunScheduled or RunBackfill.
	RunType string
	// LogicalDate, IntervalStart and IntervalEnd are the run's slot; nil
	// for a manual run.
	LogicalDate, IntervalStart, IntervalEnd *time.Time
	// Params are the run's conf rendered as strings, by key; nil: none.
	Params map[string]string
	// RunAsUser is the task's run_as_user; "" when it names none.
	RunAsUser string
	// HasUpstream is true when the task has upstream tasks, whose
	// outputs the claim's caller reads (Store.UpstreamOutputs).
	HasUpstream bool
}

// Completion is an agent's report that an attempt ended (Complete).
// ExitCode is nil when the process never exited on its own (a start
// failure or a kill); Error describes a start failure. Failure (optional)
// says which, and Signal names the signal for state.FailureSignal.
type Completion struct {
	Attempt
	Outcome  state.Outcome
	ExitCode *int
	Error    string
	Failure  state.Failure
	Signal   string
	// Outputs are the try's outputs (docs/task-environment.md,
	// "Outputs"), only with state.OutcomeSuccess; the caller has checked
	// them against the outputs rules. A success stores them as the TI's,
	// in the transaction that records it (outputs.go).
	Outputs map[string]string
}

// LogLine is one captured line as an agent ships it (AppendLogs). Seq
// increases per attempt from 1 and makes replays idempotent; Time is the
// agent's clock when the line was read; Stream is stdout, stderr or
// system.
type LogLine struct {
	Attempt
	Seq    int64
	Stream string
	Time   time.Time
	Line   string
	// Dropped is set on a gap marker only: the lines of the attempt the
	// agent lost before this point (protocol.LogLine.Dropped).
	Dropped int64
}

// StoredLogLine is one log line as ReadLogs returns it. (TryNumber, Seq)
// orders lines and is the cursor for the next read (LogCursor); ID is the
// row's key only. Dropped is a gap marker's count of lines lost there.
type StoredLogLine struct {
	ID        int64
	TryNumber int
	Seq       int64
	Stream    string
	Time      time.Time
	Line      string
	Dropped   int64
}

// LogPage is one read of a TI's log. Terminal is TIState.Terminal(), so a
// follower knows it can stop once it has drained the log.
type LogPage struct {
	Lines    []StoredLogLine
	TIState  state.TI
	Terminal bool
	// LogDropped is the TI's log_dropped: lines of its tries lost
	// (counted by gap markers); non-zero means the log is incomplete.
	LogDropped int64
	// More: the page stopped at its line or byte bound, so more lines may
	// follow the last one (read on after it).
	More bool
}

// DAGSummary is one applied DAG as ListDAGs returns it: its id, number of
// tasks, whether its schedule is paused (dags.paused, set by pause and
// unpause), the stored spec's size in bytes (its JSON text) and its last change, without
// the spec itself (GetDAG returns that).
type DAGSummary struct {
	DAGID     string
	Tasks     int
	Paused    bool
	SpecBytes int
	UpdatedAt time.Time
}

// Run is one DAG run. Reason and Message are empty until the run ends
// failed or cancelled (Message also on success). StartDate and EndDate
// are nil until the run starts and ends.
type Run struct {
	ID        int64
	DAGID     string
	State     state.Run
	Reason    state.Reason
	Message   string
	QueuedAt  time.Time
	StartDate *time.Time
	EndDate   *time.Time
	// RunType is RunManual, RunScheduled or RunBackfill.
	RunType string
	// LogicalDate, IntervalStart and IntervalEnd are a scheduled or
	// backfill run's slot (docs/schedules.md); nil for a manual run.
	LogicalDate, IntervalStart, IntervalEnd *time.Time
	// Conf is the run's parameters as stored in runs.conf: checked, with
	// defaults filled (docs/params.md); nil for a run without any. JSON
	// numbers read back as float64.
	Conf map[string]any
	// TaskCounts counts the run's TIs by state (states with none are
	// absent). ListRuns, GetRun and CancelRun fill it; TriggerRun leaves
	// it nil.
	TaskCounts map[state.TI]int
}

// TaskInstance is one task of one run with the docs/design.md §3 timestamps (nil
// until the TI reaches the step that stamps them). MaxTries is retries+1;
// AttemptID is empty and AgentID nil until the TI is first claimed.
type TaskInstance struct {
	ID     int64
	RunID  int64
	TaskID string
	// Ordinal is the task's place in the DAG's declaration, from 0; the
	// run's TIs are listed and paged in this order (GetRunPage).
	Ordinal          int
	State            state.TI
	Reason           state.Reason
	Message          string
	TryNumber        int
	MaxTries         int
	DispatchAttempts int
	AttemptID        string
	AgentID          *int64
	ExitCode         *int
	QueuedAt         *time.Time
	ClaimedAt        *time.Time
	StartedAt        *time.Time
	LastHeartbeatAt  *time.Time
	EndDate          *time.Time
	NextRetryAt      *time.Time
	// LogDropped is how many log lines of its tries agents lost (their
	// gap markers' counts): non-zero means its log is incomplete.
	LogDropped int64
	// Late is the last completion for one of this TI's attempts that
	// arrived after a reaper had given up on that attempt (GetRun only;
	// nil when none did).
	Late *LateOutcome
}

// RunDetail is a run with its task instances in declaration order
// (GetRun).
type RunDetail struct {
	Run
	TaskInstances []TaskInstance
}

// Event is one entry of a run's timeline. TIID, TaskID, TryNumber,
// AttemptID and AgentID are set (non-nil, non-empty) only on events about
// a task instance, its attempt or its agent.
type Event struct {
	ID        int64
	RunID     int64
	Time      time.Time
	Kind      state.EventKind
	TIID      *int64
	TaskID    string
	TryNumber *int
	AttemptID string
	AgentID   *int64
	Message   string
}

// EventsPageMax is the largest page RunEventsPage returns, in events.
const EventsPageMax = 5000

// EventPage is one page of a run's timeline (RunEventsPage): events oldest
// first, never nil. NextCursor is the id of the page's last event when
// more events followed it, and nil on the last page.
type EventPage struct {
	Events     []Event
	NextCursor *int64
}

// Agent is one registered agent with the number of TIs it runs. State is
// active, inactive (silent past the agent-lost threshold; its next
// heartbeat reactivates it) or deregistered (an ephemeral agent that
// exited).
type Agent struct {
	ID              int64
	Name            string
	Tags            []string
	Capacity        int
	Running         int
	State           state.Agent
	RegisteredAt    time.Time
	LastHeartbeatAt time.Time
}

package protocol

import (
	"encoding/json"
	"strings"
	"time"
)

// DAG is one applied DAG as returned by GET /v1/dags. Paused is the
// DAG's pause state now (pause and unpause set it; a spec's paused is only
// its initial state). SpecBytes is the stored spec's size in bytes (its
// JSON text). Spec is the validated spec in JSON form (package dag's
// Spec), only from GET /v1/dags/{dag_id}.
type DAG struct {
	DAGID     string          `json:"dag_id"`
	Tasks     int             `json:"tasks"`
	Paused    bool            `json:"paused"`
	SpecBytes int             `json:"spec_bytes"`
	Spec      json.RawMessage `json:"spec,omitempty"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// ApplyDAGRequest is the body of POST /v1/dags: one DAG spec as YAML text.
type ApplyDAGRequest struct {
	YAML string `json:"yaml"`
}

// ApplyDAGResponse reports whether the spec was new, changed or
// unchanged. Warnings name what was applied but may not run as is: a
// task whose tags no live agent offers (it waits in queued until such an
// agent comes, or dispatch-lost fails it). A warning is never a refusal.
type ApplyDAGResponse struct {
	DAGID    string   `json:"dag_id"`
	Result   string   `json:"result"` // "created" | "updated" | "unchanged"
	Warnings []string `json:"warnings,omitempty"`
}

// Run is one DAG run. States: queued, running, success, failed, cancelled.
type Run struct {
	ID        int64      `json:"id"`
	DAGID     string     `json:"dag_id"`
	State     string     `json:"state"`
	Reason    string     `json:"reason,omitempty"`
	Message   string     `json:"message,omitempty"`
	QueuedAt  time.Time  `json:"queued_at"`
	StartDate *time.Time `json:"start_date,omitempty"`
	EndDate   *time.Time `json:"end_date,omitempty"`
	// RunType is manual, scheduled or backfill (docs/schedules.md).
	RunType string `json:"run_type,omitempty"`
	// LogicalDate and the data interval are a scheduled or backfill
	// run's slot; absent for a manual run.
	LogicalDate       *time.Time `json:"logical_date,omitempty"`
	DataIntervalStart *time.Time `json:"data_interval_start,omitempty"`
	DataIntervalEnd   *time.Time `json:"data_interval_end,omitempty"`
	// Conf is the run's parameters (key -> string, number or bool),
	// checked against the DAG's params with defaults filled
	// (docs/params.md); absent for a run without any.
	Conf map[string]any `json:"conf,omitempty"`
	// Counts of TIs by state, filled by GET /v1/runs and /v1/runs/{id}.
	TaskCounts map[string]int `json:"task_counts,omitempty"`
}

// TaskInstance is one task of one run, with the docs/design.md §3 timestamps.
type TaskInstance struct {
	ID     int64  `json:"id"`
	RunID  int64  `json:"run_id"`
	TaskID string `json:"task_id"`
	// Ordinal is the task's place in the DAG's declaration, from 0.
	Ordinal int    `json:"ordinal"`
	State   string `json:"state"`
	// Reason is why the TI ended (a state.Reason), or, for a queued TI no
	// live agent can take, no_matching_agent while it waits (computed at
	// each read; Message names the missing tags).
	Reason           string     `json:"reason,omitempty"`
	Message          string     `json:"message,omitempty"`
	TryNumber        int        `json:"try_number"`
	MaxTries         int        `json:"max_tries"`
	DispatchAttempts int        `json:"dispatch_attempts"`
	AttemptID        string     `json:"attempt_id,omitempty"`
	AgentID          *int64     `json:"agent_id,omitempty"`
	ExitCode         *int       `json:"exit_code,omitempty"`
	QueuedAt         *time.Time `json:"queued_at,omitempty"`
	ClaimedAt        *time.Time `json:"claimed_at,omitempty"`
	StartedAt        *time.Time `json:"started_at,omitempty"`
	LastHeartbeatAt  *time.Time `json:"last_heartbeat_at,omitempty"`
	EndDate          *time.Time `json:"end_date,omitempty"`
	NextRetryAt      *time.Time `json:"next_retry_at,omitempty"`
	// LogDropped is how many log lines of this TI's tries agents lost
	// (counted by their gap markers); non-zero means its log is
	// incomplete.
	LogDropped int64 `json:"log_dropped,omitempty"`
	// Late is the last success an agent reported for one of this TI's
	// attempts after a reaper had given up on it; absent when none did.
	Late *LateOutcome `json:"late,omitempty"`
}

// LateOutcome is a completion that arrived after a reaper gave up on its
// attempt (docs/scheduler-resilience.md, "A completion is never lost").
// Accepted is true when it made the TI success (the run was live), false
// when the run had already ended and it was only recorded.
type LateOutcome struct {
	Outcome   string    `json:"outcome"` // success
	TryNumber int       `json:"try_number"`
	AttemptID string    `json:"attempt_id,omitempty"`
	Time      time.Time `json:"time"`
	Accepted  bool      `json:"accepted"`
	Message   string    `json:"message"`
}

// RunDetail is GET /v1/runs/{id}[?after=TASK&limit=M]: the run and one
// page of its task instances in task id order (the database's collation),
// at most M (default TIsPageDefault, at most TIsPageMax) of those whose
// task id sorts after TASK (absent: from the first). Each TI carries its
// Ordinal, to put a whole run back in the DAG's order. TaskCounts count
// every TI of the run, whatever the page.
type RunDetail struct {
	Run
	TaskInstances []TaskInstance `json:"task_instances"`
	// NextCursor is the after of the next page (the task id of this
	// page's last TI), null on the last page.
	NextCursor *string `json:"next_cursor"`
}

// Page sizes of GET /v1/runs/{id}'s task instances, in TIs: every TI of
// a 10,000-TI run in one reply took about 93 ms at p50 to serve.
const (
	// TIsPageDefault is the page size when the request has no limit.
	TIsPageDefault = 1000
	// TIsPageMax is the largest limit the endpoint accepts.
	TIsPageMax = 1000
)

// RunList is GET /v1/runs.
type RunList struct {
	Runs []Run `json:"runs"`
}

// DAGList is GET /v1/dags.
type DAGList struct {
	DAGs []DAG `json:"dags"`
}

// Event is one entry of a run's timeline (GET /v1/runs/{id}/events).
type Event struct {
	ID        int64     `json:"id"`
	RunID     int64     `json:"run_id"`
	Time      time.Time `json:"time"`
	Kind      string    `json:"kind"`
	TIID      *int64    `json:"ti_id,omitempty"`
	TaskID    string    `json:"task_id,omitempty"`
	TryNumber *int      `json:"try_number,omitempty"`
	AttemptID string    `json:"attempt_id,omitempty"`
	AgentID   *int64    `json:"agent_id,omitempty"`
	Message   string    `json:"message"`
}

// Page sizes of GET /v1/runs/{id}/events, in events.
const (
	// EventsPageDefault is the page size when the request has no limit.
	EventsPageDefault = 500
	// EventsPageMax is the largest limit the endpoint accepts.
	EventsPageMax = 5000
)

// EventList is one page of GET /v1/runs/{id}/events?after=ID&limit=N: the
// run's events with an id above after (default 0), oldest first (by id),
// at most limit of them (default EventsPageDefault, at most
// EventsPageMax).
//
// NextCursor is the id of the page's last event when more events followed
// it as the page was read: pass it as after to read the next page. It is
// null on the last page. A reader that keeps watching a live run polls
// with after set to the last id it has seen, not with NextCursor, which is
// null once it has caught up.
type EventList struct {
	Events     []Event `json:"events"`
	NextCursor *int64  `json:"next_cursor"`
}

// StoredLogLine is one log line as read back by GET
// /v1/runs/{id}/tasks/{task_id}/logs. Lines come in (try_number, seq)
// order, which is also the cursor: a follower passes the last line's
// try_number and seq as ?after_try=&after=. ID is the row's key only.
// Dropped is set on a gap marker: the lines of that try lost there.
type StoredLogLine struct {
	ID        int64     `json:"id"`
	TryNumber int       `json:"try_number"`
	Seq       int64     `json:"seq"`
	Stream    string    `json:"stream"`
	Time      time.Time `json:"time"`
	Line      string    `json:"line"`
	Dropped   int64     `json:"dropped,omitempty"`
}

// LogList is a page of log lines; Terminal is true when the TI is in a
// terminal state, so a follower can stop after draining. LogDropped is the
// TI's count of lost lines over its tries: non-zero means its log is
// incomplete, and gap markers (lines with Dropped) show where.
//
// A page holds at most 10,000 lines and about 4 MiB of them; More says it
// stopped at one of those bounds, so the reader should read on after its
// last line at once rather than wait.
type LogList struct {
	Lines      []StoredLogLine `json:"lines"`
	TIState    string          `json:"ti_state"`
	Terminal   bool            `json:"terminal"`
	LogDropped int64           `json:"log_dropped"`
	More       bool            `json:"more"`
}

// ReapCandidate is one item a reaper would act on (vigil reap --dry-run),
// or did act on (vigil reap). Signal names the positive observable signal
// that qualifies it (docs/design.md §6) and SignalAt its time; Age is how old the
// signal is on the database clock.
type ReapCandidate struct {
	Reaper    string    `json:"reaper"`   // agent_lost | dispatch_lost | orphan
	Decision  string    `json:"decision"` // the decision label it takes or would take
	RunID     int64     `json:"run_id"`
	TIID      *int64    `json:"ti_id,omitempty"`
	TaskID    string    `json:"task_id,omitempty"`
	TryNumber int       `json:"try_number,omitempty"`
	AgentID   *int64    `json:"agent_id,omitempty"`
	Signal    string    `json:"signal"`
	SignalAt  time.Time `json:"signal_at"`
	Age       Duration  `json:"age"`
	Message   string    `json:"message"`
	Applied   bool      `json:"applied"` // a forced sweep: whether the guarded write landed
}

// ReapReport is GET /v1/reap (dry run) and POST /v1/reap (forced sweep).
// Grace explains, one notice per reaper and reason, when a reaper is
// holding back: this leader has not yet led (with the database reachable)
// for its threshold, or the mass-silence brake is engaged.
type ReapReport struct {
	DryRun     bool            `json:"dry_run"`
	Leader     string          `json:"leader,omitempty"`
	Forwarded  bool            `json:"forwarded,omitempty"` // a follower asked the leader to sweep
	Grace      []GraceNotice   `json:"grace,omitempty"`
	Candidates []ReapCandidate `json:"candidates"`
	Errors     []string        `json:"errors,omitempty"`
}

// GraceNotice is why one reaper holds back (ReapReport.Grace).
type GraceNotice struct {
	Reaper  string `json:"reaper"`
	Message string `json:"message"`
}

// GraceText is every grace message, one a line; "" when there is none.
func (r ReapReport) GraceText() string {
	lines := make([]string, len(r.Grace))
	for i, n := range r.Grace {
		lines[i] = n.Message
	}
	return strings.Join(lines, "\n")
}

// VersionInfo is GET /v1/version: the server's build version.
type VersionInfo struct {
	Version string `json:"version"`
}

// Thresholds are the three reaper thresholds (docs/design.md §5 tuning API).
type Thresholds struct {
	AgentLost    Duration `json:"agent_lost"`
	DispatchLost Duration `json:"dispatch_lost"`
	Orphan       Duration `json:"orphan"`
}

// ThresholdsUpdate is PUT /v1/thresholds; nil fields are left unchanged.
type ThresholdsUpdate struct {
	AgentLost    *Duration `json:"agent_lost,omitempty"`
	DispatchLost *Duration `json:"dispatch_lost,omitempty"`
	Orphan       *Duration `json:"orphan,omitempty"`
}

// Agent is one registered agent (GET /v1/agents). State: active,
// inactive (silent past the agent-lost threshold; its next heartbeat
// reactivates it) or deregistered (the agent stopped: it deregisters
// after its drain on SIGTERM; a restart of the same name reactivates it).
type Agent struct {
	ID              int64     `json:"id"`
	Name            string    `json:"name"`
	Tags            []string  `json:"tags"`
	Capacity        int       `json:"capacity"`
	Running         int       `json:"running"`
	State           string    `json:"state"`
	RegisteredAt    time.Time `json:"registered_at"`
	LastHeartbeatAt time.Time `json:"last_heartbeat_at"`
}

// AgentList is GET /v1/agents.
//
// One page of agents, newest registration (highest id) first: at most
// limit of them (default AgentsPageDefault, at most AgentsPageMax), with
// id below the request's before. NextCursor is the before of the next
// page, null on the last one.
type AgentList struct {
	Agents     []Agent `json:"agents"`
	NextCursor *int64  `json:"next_cursor"`
}

// Page sizes of GET /v1/agents: a page is bounded however many agents
// (and tags) there are (docs/security.md).
const (
	AgentsPageDefault = 100
	AgentsPageMax     = 500
)

// PauseDAGResponse is the reply to pause and unpause: the DAG's state
// now, and whether the call changed it.
type PauseDAGResponse struct {
	DAGID   string `json:"dag_id"`
	Paused  bool   `json:"paused"`
	Changed bool   `json:"changed"`
}

// NextSlots is the reply to GET /v1/dags/{dag_id}/next: the DAG's next
// schedule slots, oldest first (none when it has no schedule or its
// end_date is past).
type NextSlots struct {
	DAGID    string         `json:"dag_id"`
	Schedule string         `json:"schedule"`
	Paused   bool           `json:"paused"`
	Slots    []ScheduleSlot `json:"slots"`
}

// ScheduleSlot is one schedule slot: its logical date and its data
// interval [start, end); its run is due at the interval's end.
type ScheduleSlot struct {
	LogicalDate       time.Time `json:"logical_date"`
	DataIntervalStart time.Time `json:"data_interval_start"`
	DataIntervalEnd   time.Time `json:"data_interval_end"`
}

// TriggerRunRequest is the optional body of POST /v1/dags/{dag_id}/runs.
// Conf is the run's parameters, key -> string, number or bool, checked
// against the DAG's params (docs/params.md); a broken rule is a 400
// naming the key and the rule. No body, or no conf: a run without
// parameters (defaults still apply).
type TriggerRunRequest struct {
	Conf map[string]any `json:"conf,omitempty"`
}

// BackfillRequest is the body of POST /v1/dags/{dag_id}/backfill: the
// range [from, to] of logical dates, each an RFC 3339 time
// (docs/schedules.md, "Backfill").
type BackfillRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// BackfillResponse says what a backfill did: Slots is the number of
// schedule slots in [from, to] whose data interval has ended, Created how
// many got a new backfill run (RunIDs, oldest slot first) and Existing
// how many already had one from an earlier backfill.
type BackfillResponse struct {
	DAGID    string    `json:"dag_id"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Slots    int       `json:"slots"`
	Created  int       `json:"created"`
	Existing int       `json:"existing"`
	RunIDs   []int64   `json:"run_ids"`
}

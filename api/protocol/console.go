package protocol

import "time"

// Console sessions (docs/api.md "Authentication"): POST /v1/session
// exchanges an identity's token for a session cookie; a
// state-changing request made with the cookie must echo the session's
// CSRF token in HeaderCSRF. Bearer-token clients need neither.
const (
	// SessionCookie is the HttpOnly, SameSite=Strict session cookie.
	SessionCookie = "vigil_session"
	// HeaderCSRF carries a console session's CSRF token.
	HeaderCSRF = "X-Vigil-CSRF"
	// CodeCSRF: a state-changing request by session cookie without its
	// session's CSRF token (403).
	CodeCSRF = "csrf"
)

// Roles an identity may have (package identity; docs/security.md
// "Identities and roles"), each including the one before.
const (
	// RoleViewer reads and changes nothing.
	RoleViewer = "viewer"
	// RoleOperator also changes DAGs and runs.
	RoleOperator = "operator"
	// RoleAdmin also changes the control plane (thresholds, reaps, the
	// fence, secrets, ...) and reads the audit log. The operator token's
	// identity, "operator", has it.
	RoleAdmin = "admin"
)

// SessionRequest is the body of POST /v1/session.
type SessionRequest struct {
	Token string `json:"token"`
}

// Session is who a caller is: the reply of POST and GET /v1/session
// (`vigil whoami`). ExpiresAt and CSRFToken are set for a console session
// only.
type Session struct {
	// Name is the identity: "operator" and "viewer" for the built-in
	// tokens, a users file entry's name otherwise.
	Name string `json:"name"`
	Role string `json:"role"` // RoleViewer | RoleOperator | RoleAdmin
	// Auth is how the caller authenticated: "bearer" or "session".
	Auth             string     `json:"auth"`
	ExpiresAt        *time.Time `json:"expires_at,omitempty"`
	CSRFToken        string     `json:"csrf_token,omitempty"`
	ViewerConfigured bool       `json:"viewer_configured"`
}

// AtRisk is GET /v1/at-risk: the work a reaper will act on if nothing
// changes, with the time left before it does (docs/scheduler-resilience.md
// "Work at risk"). It is computed from the reapers' own candidate queries
// at Now, the database clock.
type AtRisk struct {
	Now               time.Time  `json:"now"`
	HeartbeatInterval Duration   `json:"heartbeat_interval"`
	Thresholds        Thresholds `json:"thresholds"`
	// RunHorizon: runs whose timeout deadline is within it are listed.
	RunHorizon Duration        `json:"run_horizon"`
	Running    []AtRiskRunning `json:"running"`
	Queued     []AtRiskQueued  `json:"queued"`
	Runs       []AtRiskRun     `json:"runs"`
	// Grace tells why a reaper would hold back now (post-leadership grace,
	// mass-silence brake, a follower's unknown grace): time left is then
	// a lower bound.
	Grace []GraceNotice `json:"grace,omitempty"`
}

// AtRiskRunning is a running TI whose heartbeat is overdue by more than
// one heartbeat interval. TimeLeft is what remains of the agent-lost
// threshold (0 once past it); Decision and Outcome are what the
// agent-lost reaper would decide and write.
type AtRiskRunning struct {
	RunID           int64     `json:"run_id"`
	TIID            int64     `json:"ti_id"`
	TaskID          string    `json:"task_id"`
	TryNumber       int       `json:"try_number"`
	AgentID         *int64    `json:"agent_id,omitempty"`
	Started         bool      `json:"started"`
	LastHeartbeatAt time.Time `json:"last_heartbeat_at"`
	Silent          Duration  `json:"silent"`
	Overdue         Duration  `json:"overdue"`
	TimeLeft        Duration  `json:"time_left"`
	Decision        string    `json:"decision"`
	Outcome         string    `json:"outcome"`
}

// AtRiskQueued is a queued TI that no active agent can take. TimeLeft is
// what remains of the dispatch-lost threshold (0 once past it).
type AtRiskQueued struct {
	RunID        int64     `json:"run_id"`
	TIID         int64     `json:"ti_id"`
	TaskID       string    `json:"task_id"`
	TryNumber    int       `json:"try_number"`
	QueuedAt     time.Time `json:"queued_at"`
	Queued       Duration  `json:"queued"`
	RequiredTags []string  `json:"required_tags"`
	MissingTags  []string  `json:"missing_tags"`
	ActiveAgents int       `json:"active_agents"`
	TimeLeft     Duration  `json:"time_left"`
	Outcome      string    `json:"outcome"`
}

// AtRiskRun is a queued or running run whose timeout deadline is within
// AtRisk.RunHorizon (TimeLeft 0 once past it).
type AtRiskRun struct {
	RunID    int64     `json:"run_id"`
	DAGID    string    `json:"dag_id"`
	State    string    `json:"state"`
	Timeout  Duration  `json:"timeout"`
	Deadline time.Time `json:"deadline"`
	TimeLeft Duration  `json:"time_left"`
}

// ReaperSweep is one reaper's last scheduled or forced pass on a leader:
// when it began (database clock), how long it took, what it listed and
// how many writes landed.
type ReaperSweep struct {
	Reaper     string    `json:"reaper"`
	At         time.Time `json:"at"`
	Duration   Duration  `json:"duration"`
	Candidates int       `json:"candidates"`
	Applied    int       `json:"applied"`
	Errors     int       `json:"errors"`
}

// ReplicaReport is what a replica publishes about itself every few
// seconds (store.ReplicaStatus.Report). Reapers, the grace and the brake
// are set while it leads.
type ReplicaReport struct {
	Reapers []ReaperSweep `json:"reapers"`
	// Decisions counts vigil_scheduler_decisions_total by decision since
	// this process started.
	Decisions map[string]int64 `json:"decisions"`
	// GraceStart is since when this leader counts heartbeat staleness;
	// GraceEnds = GraceStart + the agent-lost threshold, before which the
	// heartbeat-based reapers hold (docs/design.md §6).
	GraceStart *time.Time `json:"grace_start,omitempty"`
	GraceEnds  *time.Time `json:"grace_ends,omitempty"`
	// BrakeEngaged and BrakeMessage are the mass-silence brake's verdict.
	BrakeEngaged bool   `json:"brake_engaged"`
	BrakeMessage string `json:"brake_message,omitempty"`
}

// Replica is one replica as GET /v1/cluster shows it: its last published
// row, and SeenAgo, how long ago that was on the database clock.
type Replica struct {
	ReplicaID string    `json:"replica_id"`
	Leading   bool      `json:"leading"`
	Epoch     int64     `json:"epoch"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	SeenAt    time.Time `json:"seen_at"`
	SeenAgo   Duration  `json:"seen_ago"`
	ReplicaReport
}

// Cluster is GET /v1/cluster: the same on every replica, because it is
// read from the database (docs/console.md, the Cluster page). Leader and
// Epoch are the leader fence's holder and epoch; Self is the replica that
// answered; Replicas are those seen within the last minute, the leader
// first.
type Cluster struct {
	Now               time.Time  `json:"now"`
	Leader            string     `json:"leader"`
	Epoch             int64      `json:"epoch"`
	Self              string     `json:"self"`
	HeartbeatInterval Duration   `json:"heartbeat_interval"`
	Thresholds        Thresholds `json:"thresholds"`
	Replicas          []Replica  `json:"replicas"`
}

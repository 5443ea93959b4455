// Package protocol holds the JSON shapes of Vigil's HTTP API, version 1,
// shared by the server (package api), the agent and the CLI client.
//
// Durations travel as Go duration strings ("15s"); timestamps as RFC 3339
// with nanoseconds. Words the protocol shares with the rest of Vigil
// (outcomes, failures, stop reasons) are package state's types, which
// encode as their plain strings. Source of the rules: docs/design.md §4 (agent protocol).
package protocol

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/vigil-sched/vigil/state"
)

// Duration is a time.Duration that encodes in JSON as a Go duration string
// ("90s"). Decoding also accepts a number of nanoseconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON encodes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts "90s" or an integer number of nanoseconds.
// Errors: a malformed string or a negative value.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration must be a string such as \"90s\": %w", err)
		}
		s = time.Duration(n).String()
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	if v < 0 {
		return fmt.Errorf("duration %q must not be negative", s)
	}
	*d = Duration(v)
	return nil
}

// Attempt names one claim of a task instance: the TI id plus the random
// attempt_id minted by that claim. Only the current attempt may heartbeat
// or complete.
type Attempt struct {
	TIID      int64  `json:"ti_id"`
	AttemptID string `json:"attempt_id"`
}

// StopOrder tells an agent to kill the process of an attempt, and why
// (one of state.StopReasons()).
type StopOrder struct {
	Attempt
	Reason state.StopReason `json:"reason"`
}

// HeaderAgentCredential carries an agent's own credential, next to the
// shared agent token in "Authorization: Bearer". Every request under
// /v1/agents/{agent_id}/ must carry the credential that agent's
// registration returned (deregister also accepts the operator token
// alone); a register request carries it when the agent has one, to prove
// it is the same agent reconnecting. docs/configuration.md, "Agent
// credentials".
const HeaderAgentCredential = "Vigil-Agent-Credential"

// RegisterRequest is the body of POST /v1/agents/register. InFlight lists
// the attempts the agent is still running (reconnect after an outage) or
// holds an undelivered completion for, each with its true Started flag: a
// claimed attempt whose process has not been started yet reports false,
// so the server can still requeue it without spending a try.
//
// Tags holds at most MaxAgentTags tags of at most MaxTagLen bytes each:
// every claim matches them and GET /v1/agents returns them, so they are
// bounded like every other input (docs/security.md).
type RegisterRequest struct {
	Name     string           `json:"name"`
	Tags     []string         `json:"tags"`
	Capacity int              `json:"capacity"`
	InFlight []HeartbeatEntry `json:"in_flight"`
}

// Bounds on an agent's tags (RegisterRequest.Tags).
const (
	MaxAgentTags = 64 // tags per agent
	MaxTagLen    = 64 // bytes per tag
)

// RegisterResponse carries the agent's id, its credential, the heartbeat
// interval it must keep, and the in-flight attempts it must terminate.
// Credential is a secret bound to AgentID: the agent sends it in the
// HeaderAgentCredential header of every later request, and keeps it in
// memory only (a restarted process registers anew).
type RegisterResponse struct {
	AgentID           int64       `json:"agent_id"`
	Credential        string      `json:"credential"`
	HeartbeatInterval Duration    `json:"heartbeat_interval"`
	Terminate         []StopOrder `json:"terminate"`
	ServerTime        time.Time   `json:"server_time"`
}

// ClaimRequest is the body of POST /v1/agents/{id}/claim. Slots is how
// many more TIs the agent can start now; the server never hands out more
// than capacity minus the agent's running TIs. Wait bounds the long poll
// (at most 30 s).
type ClaimRequest struct {
	Slots int      `json:"slots"`
	Wait  Duration `json:"wait"`
}

// ClaimedTask is one TI handed to an agent by a claim. The claim is its
// first heartbeat.
type ClaimedTask struct {
	Attempt
	RunID     int64             `json:"run_id"`
	DAGID     string            `json:"dag_id"`
	TaskID    string            `json:"task_id"`
	TryNumber int               `json:"try_number"`
	Command   []string          `json:"command"`
	Env       map[string]string `json:"env,omitempty"`
	// Secrets are the values of the secrets the task's env names, by
	// variable: sent only in the claim reply to the agent that claimed
	// this attempt. The agent adds them to the task's environment (over
	// Env) and masks each value in the task's log lines. Absent: none.
	Secrets          map[string]string `json:"secrets,omitempty"`
	ExecutionTimeout Duration          `json:"execution_timeout"` // 0: none
	// RunType is the run's manual, scheduled or backfill; absent from an
	// older server.
	RunType string `json:"run_type,omitempty"`
	// LogicalDate and the data interval are the run's slot; absent for a
	// manual run (docs/task-environment.md).
	LogicalDate       *time.Time `json:"logical_date,omitempty"`
	DataIntervalStart *time.Time `json:"data_interval_start,omitempty"`
	DataIntervalEnd   *time.Time `json:"data_interval_end,omitempty"`
	// Params are the run's parameters as strings, by key; the task's
	// VIGIL_PARAM_<KEY> (docs/params.md). Absent: none.
	Params map[string]string `json:"params,omitempty"`
	// RunAsUser is the OS user the task's run_as_user names; the agent
	// runs it so only when its --task-users-allowed lists the name
	// (docs/task-environment.md). Absent: the agent's --task-user.
	RunAsUser string `json:"run_as_user,omitempty"`
	// Inputs are the outputs of the task's direct upstreams, as the
	// VIGIL_INPUT_<TASK_ID>_<KEY> variables that carry them, by name
	// (docs/task-environment.md, "Outputs"); at most
	// outputs.MaxInputBytes of names and values. Absent: none.
	Inputs map[string]string `json:"inputs,omitempty"`
}

// ClaimResponse lists the claimed TIs; empty when the long poll timed out.
type ClaimResponse struct {
	Tasks []ClaimedTask `json:"tasks"`
}

// HeartbeatEntry reports one attempt; Started is true once its process has
// been started.
type HeartbeatEntry struct {
	Attempt
	Started bool `json:"started"`
}

// HeartbeatRequest is the body of POST /v1/agents/{id}/heartbeat: every
// attempt the agent runs, refreshed in one statement.
type HeartbeatRequest struct {
	Entries []HeartbeatEntry `json:"entries"`
}

// HeartbeatResponse lists the attempts the agent must stop, and the
// database clock.
type HeartbeatResponse struct {
	Stop       []StopOrder `json:"stop"`
	ServerTime time.Time   `json:"server_time"`
}

// CompleteRequest is the body of POST /v1/agents/{id}/complete. It is
// accepted only for the current attempt; otherwise 409 stale_attempt.
//
// Failure and Signal are optional and newer than the rest: an agent that
// omits them gets reason exit_code for every failure, as before, and a
// server that does not know them ignores them.
type CompleteRequest struct {
	Attempt
	Outcome  state.Outcome `json:"outcome"`
	ExitCode *int          `json:"exit_code,omitempty"`
	Error    string        `json:"error,omitempty"`
	// Failure is empty (the command exited with a non-zero ExitCode:
	// reason exit_code) or one of state.AgentFailures(), only with
	// state.OutcomeFailed; each is recorded as the reason of its name.
	Failure state.Failure `json:"failure,omitempty"`
	// Signal is the name of the signal ("SIGKILL") that ended the process,
	// only with state.FailureSignal.
	Signal string `json:"signal,omitempty"`
	// Outputs are what the task wrote to its VIGIL_OUTPUT file, by key,
	// only with state.OutcomeSuccess (docs/task-environment.md,
	// "Outputs"). The server checks them as the agent did: a key that
	// breaks the key rule is a 400; outputs over outputs.MaxBytes fail
	// the TI with reason output_too_large.
	Outputs map[string]string `json:"outputs,omitempty"`
}

// CompleteResponse reports the TI's state after the completion.
type CompleteResponse struct {
	State string `json:"state"`
}

// CompleteBatchRequest is the body of POST /v1/agents/{id}/completions:
// up to MaxCompletionBatch completions, each as CompleteRequest. The
// agent sends the completions that end within a few milliseconds of each
// other together (docs/design.md §4 complete; adr/0018).
type CompleteBatchRequest struct {
	Completions []CompleteRequest `json:"completions"`
}

// MaxCompletionBatch is the most completions one CompleteBatchRequest may
// carry.
const MaxCompletionBatch = 1000

// CompleteBatchResponse has one result per completion of the request, in
// its order.
type CompleteBatchResponse struct {
	Results []CompletionResult `json:"results"`
}

// CompletionResult is one completion's outcome within a batch: State as
// CompleteResponse when it was accepted, or Error with the code and
// message the single route would have answered (stale_attempt for an
// attempt that is not current, forbidden, not_found), each item judged
// on its own.
type CompletionResult struct {
	Attempt
	State string       `json:"state,omitempty"`
	Error *ErrorDetail `json:"error,omitempty"`
}

// Log streams.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
	StreamSystem = "system" // agent-written lines, e.g. gap markers
)

// LogLine is one captured line. Seq increases per attempt from 1 and makes
// replays idempotent; Time is the agent's clock when the line was read.
// Dropped is set on a gap marker (Stream system) only: how many lines of
// this attempt the agent's buffer dropped, never stored, since the
// attempt's previous marker. Lines stored + the Dropped of its markers =
// lines the attempt printed.
type LogLine struct {
	Attempt
	Seq     int64     `json:"seq"`
	Stream  string    `json:"stream"`
	Time    time.Time `json:"time"`
	Line    string    `json:"line"`
	Dropped int64     `json:"dropped,omitempty"`
}

// LogsRequest is the body of POST /v1/agents/{id}/logs.
type LogsRequest struct {
	Lines []LogLine `json:"lines"`
}

// ErrorBody is every non-2xx reply: {"error": {"code", "message"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a machine-readable code plus a human message. A 5xx
// reply's message is generic; its RequestID names the server log line
// that holds the detail (docs/security.md, "Errors").
type ErrorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
}

// HeaderRequestID carries, on every reply, the id the server gave the
// request; its log lines about the request carry the same id.
const HeaderRequestID = "Vigil-Request-Id"

// Error codes used in ErrorDetail.Code.
const (
	CodeBadRequest   = "bad_request"
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	CodeNotFound     = "not_found"
	CodeStaleAttempt = "stale_attempt"
	CodeConflict     = "conflict"
	// CodeNameInUse: a register for a name another live agent holds (409).
	CodeNameInUse = "name_in_use"
	// CodeAgentCredential: the HeaderAgentCredential header is missing or
	// is not the credential of the agent in the path (403). An agent that
	// gets it must register again.
	CodeAgentCredential = "agent_credential"
	// CodeTooLarge: the request body is over the route's bound (413).
	CodeTooLarge = "too_large"
	// CodeRateLimited: too many sign-in attempts from one client address
	// (429); the Retry-After header says when to try again.
	CodeRateLimited = "rate_limited"
	CodeUnavailable = "unavailable"
	CodeInternal    = "internal"
	// CodeSecretsDisabled: a secrets route on a server started without
	// --secrets-key-file (503).
	CodeSecretsDisabled = "secrets_disabled"
)

// StopWatchRequest is the body of POST /v1/agents/{id}/stops: a long
// poll (Wait, at most 30 s) that returns as soon as a TI the agent runs
// is cancelled, so the stop order reaches it within a moment instead of
// at its next heartbeat.
type StopWatchRequest struct {
	Wait Duration `json:"wait"`
}

// StopWatchResponse ends a stop watch. Stop true: heartbeat now, its
// reply carries the stop orders. False: the wait ended with nothing to
// stop; watch again.
type StopWatchResponse struct {
	Stop bool `json:"stop"`
}

// Package api serves Vigil's HTTP API (docs/design.md §4, §10): the agent protocol
// under /v1/agents, the operator endpoints behind the CLI, /metrics and the
// health endpoints. Every replica serves all of it; each request is a short
// PostgreSQL transaction, so any replica can answer any agent.
//
// Authentication is by bearer token: the agent token may only use the agent
// endpoints, and only for the agent's own attempts; every other route
// needs an identity (the operator or viewer token, or a users file entry's
// token) whose role is the route's (routeTable). An agent endpoint that acts for an agent id
// (/v1/agents/{agent_id}/...) also needs that agent's own credential, the
// secret its registration returned, in the Vigil-Agent-Credential header;
// deregister accepts the operator token instead. /metrics, the health
// endpoints and the OpenAPI document (GET /v1/openapi.json) are open.
//
// The route table (Routes) is the list the server registers from; the
// OpenAPI 3 document api/openapi.json describes every route in it, and a
// test fails when the two disagree (docs/api.md, ADR 0016).
package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vigil-sched/vigil/agenttoken"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/identity"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/secrets"
	"github.com/vigil-sched/vigil/store"
)

// MaxClaimWait bounds a claim long-poll (docs/design.md §4).
const MaxClaimWait = 30 * time.Second

// Control is what the API needs from the scheduler: health, the tuning
// API and manual recovery. *scheduler.Scheduler implements it.
type Control interface {
	Heartbeat(ctx context.Context) error
	Leading() bool
	LastTick() time.Time
	Interval() time.Duration
	Thresholds() reaper.Thresholds
	UpdateThresholds(ctx context.Context, agentLost, dispatchLost, orphan *time.Duration) error
	ResetThresholds(ctx context.Context) error
	RefreshThresholds(ctx context.Context) error
	SweepNow(ctx context.Context) (reaper.Report, error)
	DryRun(ctx context.Context) (reaper.Report, error)
	// MassSilence is the leader's mass-silence brake verdict, for health.
	MassSilence() reaper.Brake
	// AtRisk lists the work a reaper will act on if nothing changes
	// (GET /v1/at-risk): of every run (runID 0) or of one.
	AtRisk(ctx context.Context, runID int64) (reaper.AtRiskReport, error)
}

// Config configures a Server. Store, Metrics and both tokens are required.
type Config struct {
	Store         *store.Store
	Listener      *store.Listener // optional: wakes claim long-polls
	Metrics       *metrics.Metrics
	Logger        *slog.Logger
	AgentToken    string
	OperatorToken string
	// ViewerToken, optional, may read everything an operator may and
	// change nothing (docs/api.md "Authentication").
	ViewerToken string
	// AgentTokens, optional, are agent tokens each limited to a list of
	// tags (--agent-tokens-file, package agenttoken): an agent with one
	// may register only those tags, and claims only while its tags stay
	// within them. AgentToken stays the token for all tags.
	AgentTokens *agenttoken.Set
	// Users, optional, are the named identities of --users-file (package
	// identity), each with its role, beside the operator token (identity
	// "operator", admin) and the viewer token (identity "viewer").
	Users             *identity.Set
	HeartbeatInterval time.Duration        // told to agents at register; default 15s
	Control           Control              // required for /monitor/health, thresholds and reap
	LeaderStatus      func() leader.Status // optional
	// Console, optional, serves the web console (package web) for paths
	// the API does not own; it reports false for a path it does not serve.
	Console func(w http.ResponseWriter, r *http.Request) bool
	Version string // the build, for GET /v1/version; default "dev"
	// Secrets, optional, seals and opens secret values with the key of
	// --secrets-key-file, which the caller has checked against the
	// database (store.CheckSecretsKey). nil: the secrets routes answer
	// 503 secrets_disabled and a DAG naming a secret is refused at apply.
	Secrets *secrets.Box
	// BulkLimit bounds the agent claims, completions and log batches
	// using the database at once on this replica (limits.go); 0: no
	// bound. Set it below the main pool's size so that operator and
	// health requests always find a connection.
	BulkLimit int
	// SignIn throttles POST /v1/session per client address; zero fields
	// take DefaultSignInLimit's.
	SignIn SignInLimit
	// Notify, optional, posts `vigil webhooks test` deliveries; nil: the
	// test route answers 503.
	Notify WebhookTester
}

// Server is the HTTP API. Build it with New and mount Handler.
type Server struct {
	cfg       Config
	log       *slog.Logger
	mux       *http.ServeMux
	draining  chan struct{}
	drainOnce sync.Once
	promHTTP  http.Handler  // /metrics, built by routes
	bulk      chan struct{} // the bulk limit's slots (limits.go); nil: none
	signIns   *throttle     // sign-in attempts per client address (throttle.go)
}

// Drain makes every pending and future claim long-poll return at once
// with no tasks, so an HTTP shutdown does not wait out 30 s polls.
// Register it with http.Server.RegisterOnShutdown.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// New validates cfg. Errors name the field: tokens must be set and differ.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("api: Store is required")
	case cfg.Metrics == nil:
		return nil, errors.New("api: Metrics is required")
	case cfg.Control == nil:
		return nil, errors.New("api: Control (the scheduler) is required")
	case cfg.AgentToken == "":
		return nil, errors.New("agent-token: must not be empty")
	case cfg.OperatorToken == "":
		return nil, errors.New("operator-token: must not be empty")
	case cfg.AgentToken == cfg.OperatorToken:
		return nil, errors.New("agent-token: must differ from operator-token, or agents could act as operators")
	case cfg.ViewerToken != "" && (cfg.ViewerToken == cfg.OperatorToken || cfg.ViewerToken == cfg.AgentToken):
		return nil, errors.New("viewer-token: must differ from operator-token and agent-token, or viewers could change state")
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Server{cfg: cfg, log: cfg.Logger.With("component", "api"), mux: http.NewServeMux(), draining: make(chan struct{}),
		signIns: newThrottle(cfg.SignIn.withDefaults(), maxThrottled)}
	if cfg.BulkLimit > 0 {
		s.bulk = make(chan struct{}, cfg.BulkLimit)
	}
	s.routes()
	return s, nil
}

// Handler returns the root handler with metrics instrumentation.
func (s *Server) Handler() http.Handler { return s.instrument(s.mux) }

// Access is who may call a route: the authentication it demands.
type Access string

// The accesses of Routes, each matching one security requirement of the
// OpenAPI document (api/openapi.json).
const (
	// AccessOpen: no authentication (/metrics, health, the OpenAPI document).
	AccessOpen Access = "open"
	// AccessAgent: the agent bearer token.
	AccessAgent Access = "agent"
	// AccessAgentSelf: the agent bearer token plus, in the
	// Vigil-Agent-Credential header, the credential of the agent in the path.
	AccessAgentSelf Access = "agent_self"
	// AccessAgentSelfOrOperator: AccessAgentSelf, or the operator token
	// alone (deregister).
	AccessAgentSelfOrOperator Access = "agent_self_or_operator"
	// AccessOperator: an identity with the operator role or above (package
	// identity), by bearer token or console session; a state-changing
	// request by session carries the CSRF header.
	AccessOperator Access = "operator"
	// AccessRead: any identity (the viewer role or above); only for
	// routes that change nothing.
	AccessRead Access = "read"
	// AccessAdmin: an identity with the admin role, as the operator token's.
	AccessAdmin Access = "admin"
)

// Route is one entry of the server's route table: a net/http pattern
// ("METHOD /path/{param}") and who may call it.
type Route struct {
	Method string
	Path   string
	Access Access
}

// route is a Route with its handler, a method expression on *Server.
type route struct {
	pattern string
	access  Access
	handle  func(*Server, http.ResponseWriter, *http.Request)
}

// routeTable is every route the server registers, besides the catch-all
// 404 for "/". Routes exposes it, and the OpenAPI test compares it with
// api/openapi.json, so a route cannot be added without documenting it.
//
// It is also the one place that says which role each route needs
// (docs/security.md "Identities and roles"): AccessRead for reads,
// AccessOperator for changes to DAGs and runs (apply, delete, trigger,
// cancel, clear, mark, pause, backfill), AccessAdmin for changes to the
// control plane (thresholds, reaps, the fence, webhooks, secrets, pools,
// retention) and the audit log.
var routeTable = []route{
	{"POST /v1/agents/register", AccessAgent, (*Server).register},
	{"POST /v1/agents/{agent_id}/claim", AccessAgentSelf, (*Server).claim},
	{"POST /v1/agents/{agent_id}/heartbeat", AccessAgentSelf, (*Server).heartbeat},
	{"POST /v1/agents/{agent_id}/complete", AccessAgentSelf, (*Server).complete},
	{"POST /v1/agents/{agent_id}/completions", completionsAccess, (*Server).completions},
	{"POST /v1/agents/{agent_id}/logs", AccessAgentSelf, (*Server).logs},
	{"POST /v1/agents/{agent_id}/stops", AccessAgentSelf, (*Server).stopWatch},
	{"POST /v1/agents/{agent_id}/deregister", AccessAgentSelfOrOperator, (*Server).deregister},

	{"GET /v1/agents", AccessRead, (*Server).listAgents},
	{"GET /v1/dags", AccessRead, (*Server).listDAGs},
	{"POST /v1/dags", AccessOperator, (*Server).applyDAG},
	{"GET /v1/dags/{dag_id}", AccessRead, (*Server).getDAG},
	{"DELETE /v1/dags/{dag_id}", AccessOperator, (*Server).deleteDAG},
	{"POST /v1/dags/{dag_id}/runs", AccessOperator, (*Server).triggerRun},
	{"POST /v1/dags/{dag_id}/pause", AccessOperator, (*Server).pauseDAG},
	{"POST /v1/dags/{dag_id}/unpause", AccessOperator, (*Server).unpauseDAG},
	{"GET /v1/dags/{dag_id}/next", AccessRead, (*Server).nextSlots},
	{"GET /v1/dags/{dag_id}/grid", AccessRead, (*Server).dagGrid},
	{"POST /v1/dags/{dag_id}/backfill", AccessOperator, (*Server).backfill},
	{"GET /v1/runs", AccessRead, (*Server).listRuns},
	{"GET /v1/runs/{run_id}", AccessRead, (*Server).getRun},
	{"GET /v1/runs/{run_id}/events", AccessRead, (*Server).runEvents},
	{"POST /v1/runs/{run_id}/cancel", AccessOperator, (*Server).cancelRun},
	{"POST /v1/runs/{run_id}/clear", AccessOperator, (*Server).clearRun},
	{"POST /v1/runs/{run_id}/tasks/{task_id}/mark", AccessOperator, (*Server).markTI},
	{"GET /v1/runs/{run_id}/tasks/{task_id}/logs", AccessRead, (*Server).readLogs},
	{"GET /v1/runs/{run_id}/outputs", AccessRead, (*Server).runOutputs},
	{"GET /v1/thresholds", AccessRead, (*Server).getThresholds},
	{"PUT /v1/thresholds", AccessAdmin, (*Server).putThresholds},
	{"DELETE /v1/thresholds", AccessAdmin, (*Server).resetThresholds},
	{"GET /v1/reap", AccessRead, (*Server).reapDryRun},
	{"POST /v1/reap", AccessAdmin, (*Server).reapNow},
	{"GET /v1/at-risk", AccessRead, (*Server).atRisk},
	{"GET /v1/cluster", AccessRead, (*Server).cluster},
	{"GET /v1/secrets", AccessAdmin, (*Server).listSecrets},
	{"PUT /v1/secrets/{name}", AccessAdmin, (*Server).setSecret},
	{"DELETE /v1/secrets/{name}", AccessAdmin, (*Server).deleteSecret},
	{"GET /v1/webhooks", webhooksAccess, (*Server).listWebhooks},
	{"PUT /v1/webhooks/{name}", webhooksAccess, (*Server).setWebhook},
	{"DELETE /v1/webhooks/{name}", webhooksAccess, (*Server).deleteWebhook},
	{"POST /v1/webhooks/{name}/test", webhooksAccess, (*Server).testWebhook},
	{"GET /v1/notifications", AccessRead, (*Server).listNotifications},
	{"GET /v1/pools", AccessRead, (*Server).listPools},
	{"PUT /v1/pools/{name}", AccessAdmin, (*Server).setPool},
	{"DELETE /v1/pools/{name}", AccessAdmin, (*Server).deletePool},
	{"GET /v1/audit", AccessAdmin, (*Server).listAudit},
	{"POST /v1/fence/reset", AccessAdmin, (*Server).resetFence},

	{"POST /v1/session", AccessOpen, (*Server).signIn},
	{"GET /v1/session", AccessRead, (*Server).getSession},
	{"DELETE /v1/session", AccessOpen, (*Server).signOut},

	{"GET /v1/openapi.json", AccessOpen, (*Server).openAPI},
	{"GET /v1/version", AccessOpen, (*Server).version},
	{"GET /metrics", AccessOpen, (*Server).metricsHandler},
	{"GET /healthz", AccessOpen, (*Server).healthz},
	{"GET /readyz", AccessOpen, (*Server).readyz},
	{"GET /monitor/health", AccessOpen, (*Server).monitorHealth},
}

// Routes returns the route table the server registers (besides the
// catch-all 404), in registration order.
func Routes() []Route {
	out := make([]Route, len(routeTable))
	for i, rt := range routeTable {
		method, path, _ := strings.Cut(rt.pattern, " ")
		out[i] = Route{Method: method, Path: path, Access: rt.access}
	}
	return out
}

func (s *Server) routes() {
	s.promHTTP = promhttp.HandlerFor(s.cfg.Metrics.Registry, promhttp.HandlerOpts{})
	for _, rt := range routeTable {
		h := func(w http.ResponseWriter, r *http.Request) { rt.handle(s, w, r) }
		var hd http.Handler
		switch rt.access {
		case AccessAgentSelf:
			// self: the agent in the path, proven by its credential.
			hd = s.auth(rt.access, s.agentSelf(h))
		case AccessAgentSelfOrOperator:
			hd = s.auth(rt.access, func(w http.ResponseWriter, r *http.Request) {
				if !callerOf(r.Context()).agent {
					h(w, r)
					return
				}
				s.agentSelf(h)(w, r)
			})
		case AccessAgent, AccessOperator, AccessRead, AccessAdmin:
			hd = s.auth(rt.access, h)
		case AccessOpen:
			hd = boundBody(maxOpenBody, http.HandlerFunc(h))
		default:
			panic("api: route " + rt.pattern + " has no access")
		}
		if method, _, _ := strings.Cut(rt.pattern, " "); audited(method, rt.access) {
			hd = s.auditCall(rt.pattern, hd)
		}
		s.mux.Handle(rt.pattern, s.byClass(rt.pattern, hd))
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Console != nil && s.cfg.Console(w, r) {
			return
		}
		writeError(w, http.StatusNotFound, protocol.CodeNotFound, "no route for "+r.Method+" "+r.URL.Path)
	})
}

// metricsHandler serves /metrics from the Prometheus registry.
func (s *Server) metricsHandler(w http.ResponseWriter, r *http.Request) { s.promHTTP.ServeHTTP(w, r) }

// statusRecorder captures the status code for metrics.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// The request id goes out before the handler writes: writeError
		// reads it back from the header for a 5xx body.
		id := newRequestID()
		w.Header().Set(protocol.HeaderRequestID, id)
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" || route == "/" {
			route = "unmatched"
		}
		s.cfg.Metrics.HTTPRequests.WithLabelValues(route, strconv.Itoa(rec.code)).Inc()
		s.cfg.Metrics.HTTPDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}

// maxBody bounds request bodies: a log batch of 500 lines of up to 64 KiB.
const maxBody = 40 << 20

// maxOpenBody bounds the body of a route that needs no authentication
// (POST /v1/session): anyone can send one, so it may cost the server
// no more memory than a sign-in needs (docs/security.md, "Limits").
const maxOpenBody = 16 << 10

// boundBody refuses a body over n bytes: at once with 413 when its
// declared length is over, before a byte of it is read (the connection
// is then closed, so the rest is never read either); otherwise next reads
// at most n+1 bytes of it and a decode past n is a 413.
func boundBody(n int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > n {
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusRequestEntityTooLarge, protocol.CodeTooLarge,
				fmt.Sprintf("request body: %d bytes, more than the %d this route accepts", r.ContentLength, n))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, n)
		next.ServeHTTP(w, r)
	})
}

// decode reads a JSON body strictly: unknown fields and trailing data are
// errors that name the problem.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeFrom(w, http.MaxBytesReader(w, r.Body, maxBody), v)
}

// decodeOptional is decode for a body that may be absent: an empty body
// leaves v as it is.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) bool {
	body := bufio.NewReader(http.MaxBytesReader(w, r.Body, maxBody))
	if _, err := body.Peek(1); errors.Is(err, io.EOF) {
		return true
	}
	return decodeFrom(w, body, v)
}

func decodeFrom(w http.ResponseWriter, body io.Reader, v any) bool {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if maxErr := (*http.MaxBytesError)(nil); errors.As(err, &maxErr) {
			writeError(w, http.StatusRequestEntityTooLarge, protocol.CodeTooLarge,
				fmt.Sprintf("request body: more than the %d bytes this route accepts", maxErr.Limit))
			return false
		}
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, "request body: "+describeJSONError(err))
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, "request body: trailing data after the JSON object")
		return false
	}
	return true
}

func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &typeErr):
		return fmt.Sprintf("field %q: expected %s, got %s", typeErr.Field, typeErr.Type, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("invalid JSON at byte %d: %v", syntaxErr.Offset, err)
	case errors.As(err, &maxErr):
		return fmt.Sprintf("larger than %d bytes", maxErr.Limit)
	case errors.Is(err, io.EOF):
		return "empty body, expected a JSON object"
	default:
		return err.Error()
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes an ErrorBody; a 5xx one carries the request id (set
// by instrument), by which the server log holds the detail.
func writeError(w http.ResponseWriter, code int, errCode, msg string) {
	d := protocol.ErrorDetail{Code: errCode, Message: msg}
	if code >= 500 {
		d.RequestID = w.Header().Get(protocol.HeaderRequestID)
	}
	writeJSON(w, code, protocol.ErrorBody{Error: d})
}

// writeStoreError maps store errors to HTTP: input the store rejected (a
// run conf against the DAG's params, a backfill range) 400 with the
// error's own message naming the field and rule, not found 404, forbidden
// 403, conflict / stale attempt / name in use 409, anything else 500
// (logged).
func (s *Server) writeStoreError(w http.ResponseWriter, r *http.Request, err error) {
	status, detail := s.storeErrorDetail(r, err)
	writeError(w, status, detail.Code, detail.Message)
}

// storeErrorDetail maps a store error to its HTTP status and error body
// (see writeStoreError), logging the unexpected ones.
func (s *Server) storeErrorDetail(r *http.Request, err error) (int, protocol.ErrorDetail) {
	var stale *store.StaleAttemptError
	var inUse *store.NameInUseError
	var confErr *dag.ConfError
	var rangeErr *store.BackfillRangeError
	var missing *store.MissingSecretsError
	var missingHooks *store.MissingWebhooksError
	var missingPools *store.MissingPoolsError
	var poolErr *store.PoolError
	var poolInUse *store.PoolInUseError
	var liveRuns *store.LiveRunsError
	switch {
	case errors.As(err, &confErr), errors.As(err, &rangeErr), errors.As(err, &missing), errors.As(err, &missingHooks),
		errors.As(err, &missingPools):
		return http.StatusBadRequest, protocol.ErrorDetail{Code: protocol.CodeBadRequest, Message: err.Error()}
	case errors.As(err, &poolErr):
		return http.StatusBadRequest, protocol.ErrorDetail{Code: protocol.CodeBadRequest, Message: poolErr.Error()}
	case errors.As(err, &poolInUse):
		return http.StatusConflict, protocol.ErrorDetail{Code: protocol.CodeConflict, Message: poolInUse.Error()}
	case errors.As(err, &liveRuns):
		return http.StatusConflict, protocol.ErrorDetail{Code: protocol.CodeConflict, Message: liveRuns.Error()}
	case errors.As(err, &stale):
		return http.StatusConflict, protocol.ErrorDetail{Code: protocol.CodeStaleAttempt, Message: err.Error()}
	case errors.As(err, &inUse):
		return http.StatusConflict, protocol.ErrorDetail{Code: protocol.CodeNameInUse, Message: err.Error()}
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, protocol.ErrorDetail{Code: protocol.CodeNotFound, Message: storeMessage(err, store.ErrNotFound)}
	case errors.Is(err, store.ErrForbidden):
		return http.StatusForbidden, protocol.ErrorDetail{Code: protocol.CodeForbidden, Message: storeMessage(err, store.ErrForbidden)}
	case errors.Is(err, store.ErrConflict):
		return http.StatusConflict, protocol.ErrorDetail{Code: protocol.CodeConflict, Message: storeMessage(err, store.ErrConflict)}
	case r.Context().Err() != nil:
		return http.StatusServiceUnavailable, protocol.ErrorDetail{Code: protocol.CodeUnavailable, Message: "request cancelled"}
	default:
		return http.StatusInternalServerError, s.internal(r, err)
	}
}

// internalMessage is the whole message of every 500 reply: the detail
// (driver text, SQL, internal names) is for the server log, not the
// caller.
const internalMessage = "internal error; the server log has the detail under this request id"

// internal logs err under r's request id and returns the generic body of
// a 500 reply (docs/security.md, "Errors").
func (s *Server) internal(r *http.Request, err error) protocol.ErrorDetail {
	id := requestID(r)
	s.log.Error("request failed", "route", r.Pattern, "request_id", id, "err", err)
	return protocol.ErrorDetail{Code: protocol.CodeInternal, Message: internalMessage, RequestID: id}
}

// requestID is the id instrument gave r, which it also set on the reply.
func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey{}).(string)
	return id
}

// pathID parses a positive integer path value, writing a 400 naming the
// parameter when it is not one.
func pathID(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	v, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || v <= 0 {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("path parameter %s: %q is not a positive integer", name, r.PathValue(name)))
		return 0, false
	}
	return v, true
}

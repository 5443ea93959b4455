package api

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/vigil-sched/vigil/agenttoken"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/identity"
	"github.com/vigil-sched/vigil/store"
)

// caller is an authenticated request's identity and how it proved it:
// an agent, or a named identity of the operator API with its role.
type caller struct {
	// agent: the agent token or a scoped agent token; id is then zero.
	agent bool
	// id is the identity (name and role) of an operator API caller.
	id identity.Identity
	// session is the console session it signed in with; nil for a
	// bearer token.
	session *session
	// scope is the agent token's entry in Config.AgentTokens, which
	// limits the tags its agent may hold; nil: the plain agent token, all
	// tags.
	scope *agenttoken.Entry
}

// known reports whether c proved anything.
func (c caller) known() bool { return c.agent || c.id.Role != "" }

// via says how c authenticated: "bearer" or "session".
func (c caller) via() string {
	if c.session != nil {
		return "session"
	}
	return "bearer"
}

// authError is a refused authentication: the status, code and message.
type authError struct {
	status int
	code   string
	msg    string
}

// tokenCaller maps a presented token to its caller: the agent token, a
// scoped agent token of Config.AgentTokens with its entry, or an
// identity (tokenIdentity); the zero caller for none.
func (s *Server) tokenCaller(token string) caller {
	if token == "" {
		return caller{}
	}
	if subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.AgentToken)) == 1 {
		return caller{agent: true}
	}
	if id, ok := s.tokenIdentity(token); ok {
		return caller{id: id}
	}
	if e := s.cfg.AgentTokens.Lookup(token); e != nil {
		return caller{agent: true, scope: e}
	}
	return caller{}
}

// tokenIdentity maps a presented token to its identity: the operator
// token's (admin), the viewer token's when configured (both compared in
// constant time), or a users file entry's (identity.Set.Lookup says why a
// lookup by hash is safe).
func (s *Server) tokenIdentity(token string) (identity.Identity, bool) {
	eq := func(want string) bool {
		return want != "" && subtle.ConstantTimeCompare([]byte(token), []byte(want)) == 1
	}
	switch {
	case eq(s.cfg.OperatorToken):
		return identity.OperatorToken, true
	case eq(s.cfg.ViewerToken):
		return identity.ViewerToken, true
	}
	if e, ok := s.cfg.Users.Lookup(token); ok {
		return e.Identity(), true
	}
	return identity.Identity{}, false
}

// identify authenticates r: an Authorization bearer token wins; without
// one, the console's session cookie, which on a state-changing method
// must come with its CSRF header (docs/api.md "Authentication").
func (s *Server) identify(r *http.Request) (caller, *authError) {
	if h := r.Header.Get("Authorization"); h != "" {
		got, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || got == "" {
			return caller{}, &authError{http.StatusUnauthorized, protocol.CodeUnauthorized, "Authorization: expected \"Bearer <token>\""}
		}
		c := s.tokenCaller(got)
		if !c.known() {
			return caller{}, &authError{http.StatusUnauthorized, protocol.CodeUnauthorized, "invalid bearer token"}
		}
		return c, nil
	}
	c, err := r.Cookie(protocol.SessionCookie)
	if err != nil {
		return caller{}, &authError{http.StatusUnauthorized, protocol.CodeUnauthorized,
			"missing bearer token (or console session cookie " + protocol.SessionCookie + ")"}
	}
	// The signature first: a forged or stale-keyed cookie is refused
	// without touching the database.
	sess, verr := s.verifySignature(c.Value)
	if verr == nil {
		// One round trip: the database clock for the expiry, and whether
		// the session was signed out on any replica.
		now, revoked, err := s.cfg.Store.SessionCheck(r.Context(), sess.revocationID())
		if err != nil {
			s.log.Warn("session check", "request_id", requestID(r), "err", err)
			return caller{}, &authError{http.StatusServiceUnavailable, protocol.CodeUnavailable, "session check: the database is unavailable"}
		}
		verr = sess.checkExpiry(now)
		if verr == nil && revoked {
			verr = errors.New("signed out")
		}
	}
	if verr != nil {
		return caller{}, &authError{http.StatusUnauthorized, protocol.CodeUnauthorized, "session cookie " + protocol.SessionCookie + ": " + verr.Error() + "; sign in again"}
	}
	if !safeMethod(r.Method) && !s.csrfOK(sess, r.Header.Get(protocol.HeaderCSRF)) {
		return caller{}, &authError{http.StatusForbidden, protocol.CodeCSRF, fmt.Sprintf(
			"header %s: missing or not this session's CSRF token; a state-changing request by session cookie needs it (GET /v1/session returns it)",
			protocol.HeaderCSRF)}
	}
	return caller{id: sess.id, session: sess}, nil
}

// authFailed logs and counts a refused authentication: how it was tried
// (method, a label of vigil_auth_failures_total), the route, the client
// address and why, never the token or credential presented.
func (s *Server) authFailed(r *http.Request, method, reason string) {
	s.cfg.Metrics.AuthFailures.WithLabelValues(method).Inc()
	s.log.Warn("authentication failed", "method", method, "route", r.Pattern, "remote", r.RemoteAddr,
		"request_id", requestID(r), "reason", reason)
}

// safeMethod reports whether m changes nothing, so needs no CSRF check.
func safeMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

// allowed reports whether c may call a route of access; the message of
// a refusal names the role it needs and the caller's.
func allowed(access Access, c caller) (bool, string) {
	switch access {
	case AccessAgent, AccessAgentSelf:
		return c.agent, "this endpoint needs the agent token"
	case AccessAgentSelfOrOperator:
		return c.agent || c.id.Role.Includes(identity.Operator), "this endpoint needs the agent token or the operator role"
	}
	need := map[Access]identity.Role{AccessRead: identity.Viewer, AccessOperator: identity.Operator, AccessAdmin: identity.Admin}[access]
	if need == "" {
		return false, "no access"
	}
	if c.agent {
		return false, fmt.Sprintf("this endpoint needs the %s role; the agent token has none", need)
	}
	if c.id.Role.Includes(need) {
		return true, ""
	}
	msg := fmt.Sprintf("this endpoint needs the %s role; %s has the %s role", need, c.id.Name, c.id.Role)
	if c.id.Role == identity.Viewer {
		msg += ": the viewer role is read-only"
	}
	return false, msg
}

// auth admits a request whose caller may use a route of access.
func (s *Server) auth(access Access, next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, aerr := s.identify(r)
		auditCaller(r, c)
		if aerr != nil {
			if aerr.status == http.StatusUnauthorized {
				method := "session"
				if r.Header.Get("Authorization") != "" {
					method = "bearer"
				}
				s.authFailed(r, method, aerr.msg)
			}
			writeError(w, aerr.status, aerr.code, aerr.msg)
			return
		}
		if access == AccessAgent || access == AccessAgentSelf || access == AccessAgentSelfOrOperator {
			if c.session != nil { // agents never hold console sessions
				writeError(w, http.StatusForbidden, protocol.CodeForbidden, "this endpoint needs a bearer token, not a console session")
				return
			}
		}
		if ok, msg := allowed(access, c); !ok {
			writeError(w, http.StatusForbidden, protocol.CodeForbidden, msg)
			return
		}
		next(w, r.WithContext(withCaller(r.Context(), c)))
	})
}

// agentSelf admits a request under /v1/agents/{agent_id}/ only when its
// Vigil-Agent-Credential header holds that agent's own credential: 400 for
// a malformed id, 404 for an unknown agent (it must register again), 403
// agent_credential for a missing or foreign credential.
func (s *Server) agentSelf(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		agentID, ok := pathID(w, r, "agent_id")
		if !ok {
			return
		}
		cred := r.Header.Get(protocol.HeaderAgentCredential)
		if cred == "" {
			writeError(w, http.StatusForbidden, protocol.CodeAgentCredential, fmt.Sprintf(
				"header %s: required for agent %d: send the credential its register reply returned", protocol.HeaderAgentCredential, agentID))
			return
		}
		err := s.cfg.Store.CheckAgentCredential(r.Context(), agentID, cred)
		switch {
		case errors.Is(err, store.ErrForbidden):
			s.authFailed(r, "agent_credential", fmt.Sprintf("not the credential of agent %d", agentID))
			writeError(w, http.StatusForbidden, protocol.CodeAgentCredential, fmt.Sprintf(
				"header %s: not the credential of agent %d: an agent may act only for itself, and must register again if its name was taken over",
				protocol.HeaderAgentCredential, agentID))
		case err != nil:
			s.writeStoreError(w, r, err)
		default:
			next(w, r)
		}
	}
}

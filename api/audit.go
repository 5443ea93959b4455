package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/store"
)

// actorOf is who makes request r, as events and the audit log name it: the
// identity's name ("alice", or "operator" and "viewer" for the built-in
// tokens), "agent" for an agent token, "anonymous" for a caller that
// proved nothing. Every handler that records who acted uses it, and the
// store reads the same name from the request's audit record
// (store.ActorOf) for the events it writes.
func actorOf(r *http.Request) string {
	c := callerOf(r.Context())
	switch {
	case c.agent:
		return "agent"
	case c.id.Name != "":
		return c.id.Name
	}
	return "anonymous"
}

// audited reports whether calls of a route go to the audit log: every
// state-changing method, but not the agent protocol's (claims,
// heartbeats, completions and logs are an agent's work, not an
// operator's, and come by the thousand).
func audited(method string, access Access) bool {
	if safeMethod(method) {
		return false
	}
	return access != AccessAgent && access != AccessAgentSelf
}

// auditCall records a call of an audited route (docs/security.md "The
// audit log"). It puts the call's store.AuditRecord in the request's
// context, which auth fills with the caller and the store writes in the
// transaction of the change the call makes (store.WithAudit). A call
// whose record no change committed (refused, failed, or a change outside
// the database, as a sign-in) is appended on its own after the reply,
// with its status and error message. A sign-in refused by the throttle
// (429) is logged and counted but not appended: a flood of them costs no
// writes.
func (s *Server) auditCall(pattern string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &store.AuditRecord{
			Actor: "anonymous", Method: r.Method, Route: pattern, Target: strings.TrimPrefix(r.URL.Path, "/v1/"),
			RequestID: requestID(r), Client: clientAddr(r),
		}
		cw := &captureWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(cw, r.WithContext(store.WithAudit(r.Context(), rec)))
		if rec.Written() || cw.code == http.StatusTooManyRequests {
			return
		}
		rec.Status = cw.code
		switch {
		case cw.code < 300:
			rec.Result = store.AuditOK
		case cw.code == http.StatusUnauthorized || cw.code == http.StatusForbidden:
			rec.Result = store.AuditRefused
		default:
			rec.Result = store.AuditFailed
		}
		if cw.code >= 400 {
			var eb protocol.ErrorBody
			if json.Unmarshal(cw.body, &eb) == nil {
				rec.Message = eb.Error.Message
			}
		}
		// The reply is out: the append must not die with the request.
		if err := s.cfg.Store.AppendAudit(context.WithoutCancel(r.Context()), rec); err != nil {
			s.log.Error("audit log: append failed", "route", pattern, "request_id", rec.RequestID,
				"actor", rec.Actor, "status", cw.code, "err", err)
		}
	})
}

// auditCaller fills the audit record of r's call, if any, with the caller
// auth identified (or, c unknown, the kind of credential that failed).
func auditCaller(r *http.Request, c caller) {
	rec := store.AuditFrom(r.Context())
	if rec == nil {
		return
	}
	switch {
	case c.known():
		rec.Actor, rec.Role, rec.Auth = actorOf(r.WithContext(withCaller(r.Context(), c))), string(c.id.Role), c.via()
		if c.agent {
			rec.Role = "agent"
		}
	case r.Header.Get("Authorization") != "":
		rec.Actor, rec.Auth = "anonymous", "bearer"
	default:
		if _, err := r.Cookie(protocol.SessionCookie); err == nil {
			rec.Actor, rec.Auth = "anonymous", "session"
		}
	}
}

// maxCapturedError bounds the error body captureWriter keeps.
const maxCapturedError = 2 << 10

// captureWriter records the status and the start of an error reply's
// body, for the audit record of a refused or failed call.
type captureWriter struct {
	http.ResponseWriter
	code int
	body []byte
}

func (c *captureWriter) WriteHeader(code int) {
	c.code = code
	c.ResponseWriter.WriteHeader(code)
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.code >= 400 && len(c.body) < maxCapturedError {
		c.body = append(c.body, b[:min(len(b), maxCapturedError-len(c.body))]...)
	}
	return c.ResponseWriter.Write(b)
}

// Flush lets a streaming handler under auditCall flush.
func (c *captureWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

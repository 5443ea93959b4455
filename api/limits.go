package api

import (
	"context"
	"net/http"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/store"
)

// Route classes for connection use (docs/configuration.md,
// "Connections"). A heartbeat runs on the store's heartbeat pool
// (store.Priority), so bulk agent work never makes it wait for a
// connection; the bulk routes share Config.BulkLimit, so they never take
// every connection of the main pool from operators and health checks.
var (
	priorityRoutes = map[string]bool{
		"POST /v1/agents/{agent_id}/heartbeat": true,
	}
	bulkRoutes = map[string]bool{
		"POST /v1/agents/{agent_id}/complete":    true,
		"POST /v1/agents/{agent_id}/completions": true,
		"POST /v1/agents/{agent_id}/logs":        true,
	}
)

// byClass wraps a route's handler for its class: priority routes run
// under store.Priority, bulk routes within the bulk limit. The claim
// long-poll takes the bulk limit only around its statements (claim), not
// for its wait.
func (s *Server) byClass(pattern string, h http.Handler) http.Handler {
	switch {
	case priorityRoutes[pattern]:
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(store.Priority(r.Context())))
		})
	case bulkRoutes[pattern]:
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			release, ok := s.acquireBulk(r.Context())
			if !ok {
				writeError(w, http.StatusServiceUnavailable, protocol.CodeUnavailable, "request cancelled while waiting for a database connection")
				return
			}
			defer release()
			h.ServeHTTP(w, r)
		})
	}
	return h
}

// acquireBulk takes one slot of the bulk limit, waiting as long as ctx
// allows; ok is false when ctx ended first. Without a limit it never
// waits.
func (s *Server) acquireBulk(ctx context.Context) (release func(), ok bool) {
	if s.bulk == nil {
		return func() {}, true
	}
	select {
	case s.bulk <- struct{}{}:
		return func() { <-s.bulk }, true
	case <-ctx.Done():
		return nil, false
	}
}

package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/store"
)

// roleNeeded is the role each route needs, written out here apart from
// the route table: a route moved to another role, or a new route, fails
// this test until the two agree (docs/security.md "Identities and
// roles"). Agent routes and open routes are checked by their own tests.
var roleNeeded = map[string]string{
	"GET /v1/agents":                              "viewer",
	"GET /v1/dags":                                "viewer",
	"POST /v1/dags":                               "operator",
	"GET /v1/dags/{dag_id}":                       "viewer",
	"POST /v1/dags/{dag_id}/runs":                 "operator",
	"POST /v1/dags/{dag_id}/pause":                "operator",
	"POST /v1/dags/{dag_id}/unpause":              "operator",
	"GET /v1/dags/{dag_id}/next":                  "viewer",
	"GET /v1/dags/{dag_id}/grid":                  "viewer",
	"POST /v1/dags/{dag_id}/backfill":             "operator",
	"GET /v1/runs":                                "viewer",
	"GET /v1/runs/{run_id}":                       "viewer",
	"GET /v1/runs/{run_id}/events":                "viewer",
	"GET /v1/runs/{run_id}/outputs":               "viewer",
	"POST /v1/runs/{run_id}/cancel":               "operator",
	"POST /v1/runs/{run_id}/clear":                "operator",
	"POST /v1/runs/{run_id}/tasks/{task_id}/mark": "operator",
	"GET /v1/runs/{run_id}/tasks/{task_id}/logs":  "viewer",
	"GET /v1/thresholds":                          "viewer",
	"PUT /v1/thresholds":                          "admin",
	"DELETE /v1/thresholds":                       "admin",
	"GET /v1/reap":                                "viewer",
	"POST /v1/reap":                               "admin",
	"GET /v1/at-risk":                             "viewer",
	"GET /v1/cluster":                             "viewer",
	"GET /v1/secrets":                             "admin",
	"PUT /v1/secrets/{name}":                      "admin",
	"DELETE /v1/secrets/{name}":                   "admin",
	"GET /v1/webhooks":                            "admin",
	"PUT /v1/webhooks/{name}":                     "admin",
	"DELETE /v1/webhooks/{name}":                  "admin",
	"POST /v1/webhooks/{name}/test":               "admin",
	"GET /v1/notifications":                       "viewer",
	"GET /v1/pools":                               "viewer",
	"PUT /v1/pools/{name}":                        "admin",
	"DELETE /v1/pools/{name}":                     "admin",
	"DELETE /v1/dags/{dag_id}":                    "operator",
	"GET /v1/audit":                               "admin",
	"POST /v1/fence/reset":                        "admin",
	"GET /v1/session":                             "viewer",
	"POST /v1/agents/{agent_id}/deregister":       "operator", // or the agent itself
}

// TestEveryRouteNeedsItsRole calls every route that needs an identity as
// each role and as an agent: a role below the route's gets 403 naming the
// role it needs, a role at or above it gets past authorization (whatever
// the call then answers), the agent token gets 403. Every refused call of
// a state-changing route is in the audit log as refused, with the caller.
func TestEveryRouteNeedsItsRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	identities := []struct{ name, role, token string }{
		{"vera", "viewer", veraToken}, {"alice", "operator", aliceToken}, {"ada", "admin", adaToken},
		{"viewer", "viewer", viewerToken}, {"operator", "admin", opToken},
	}
	rank := map[string]int{"viewer": 1, "operator": 2, "admin": 3}
	params := strings.NewReplacer("{dag_id}", "nope", "{run_id}", "999999", "{task_id}", "t", "{name}", "x_1", "{agent_id}", "999999")
	refusedWrites := map[string]int{}
	checked := 0
	for _, rt := range api.Routes() {
		key := rt.Method + " " + rt.Path
		if rt.Access == api.AccessOpen || rt.Access == api.AccessAgent || rt.Access == api.AccessAgentSelf {
			continue
		}
		need, ok := roleNeeded[key]
		if !assert.True(t, ok, "route %s (access %s) is not in roleNeeded: say which role it needs", key, rt.Access) {
			continue
		}
		checked++
		path := params.Replace(rt.Path)
		for _, id := range identities {
			code, e := h.call(rt.Method, path, id.token, nil, nil)
			if rank[id.role] >= rank[need] {
				assert.NotContains(t, []int{401, 403}, code, "%s as %s (%s): %s", key, id.name, id.role, e.Message)
				continue
			}
			assert.Equal(t, 403, code, "%s as %s (%s) needs %s", key, id.name, id.role, need)
			assert.Equal(t, protocol.CodeForbidden, e.Code, key)
			assert.Contains(t, e.Message, "the "+need+" role", key)
			if rt.Method != http.MethodGet {
				refusedWrites[id.name]++
			}
		}
		if rt.Access != api.AccessAgentSelfOrOperator {
			code, _ := h.call(rt.Method, path, agentToken, nil, nil)
			assert.Equal(t, 403, code, "%s with the agent token", key)
		}
	}
	assert.Equal(t, len(roleNeeded), checked, "roleNeeded names a route the server no longer has")

	for name, want := range refusedWrites {
		page, err := h.store.ListAudit(context.Background(), store.AuditFilter{Actor: name, Limit: store.AuditPageMax})
		require.NoError(t, err)
		refused := 0
		for _, rec := range page.Records {
			if rec.Result == store.AuditRefused && rec.Status == 403 {
				refused++
				assert.Equal(t, "bearer", rec.Auth)
				assert.NotEmpty(t, rec.RequestID)
				assert.Contains(t, rec.Message, "role", "the refusal's message")
			}
		}
		assert.Equal(t, want, refused, "refused state-changing calls of %s in the audit log", name)
	}
}

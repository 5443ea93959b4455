package api_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/trigger"
)

// loadSpec parses and validates api/openapi.json with kin-openapi.
func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI())
	require.NoError(t, err, "api/openapi.json does not parse as OpenAPI 3")
	require.NoError(t, doc.Validate(context.Background()), "api/openapi.json is not a valid OpenAPI 3 document")
	return doc
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc := loadSpec(t)
	require.Equal(t, "3.0.3", doc.OpenAPI)
	for _, name := range []string{"agentToken", "operatorToken", "agentCredential", "viewerToken", "session", "csrfToken"} {
		require.Contains(t, doc.Components.SecuritySchemes, name)
	}
	cred := doc.Components.SecuritySchemes["agentCredential"].Value
	require.Equal(t, "apiKey", cred.Type)
	require.Equal(t, "header", cred.In)
	require.Equal(t, protocol.HeaderAgentCredential, cred.Name)
}

// specOperations lists "METHOD /path" for every operation of the document.
func specOperations(doc *openapi3.T) map[string]*openapi3.Operation {
	out := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			out[strings.ToUpper(method)+" "+path] = op
		}
	}
	return out
}

// securityFor is the security requirement each access must declare, as
// sorted sets of scheme names, one per alternative.
var securityFor = map[api.Access][]string{
	api.AccessOpen:                {},
	api.AccessAgent:               {"agentToken"},
	api.AccessAgentSelf:           {"agentCredential+agentToken"},
	api.AccessAgentSelfOrOperator: {"agentCredential+agentToken", "csrfToken+session", "operatorToken"},
	api.AccessOperator:            {"csrfToken+session", "operatorToken"},
	api.AccessRead:                {"operatorToken", "session", "viewerToken"},
	api.AccessAdmin:               {"csrfToken+session", "operatorToken"},
}

func securityOf(op *openapi3.Operation) []string {
	out := []string{}
	if op.Security == nil {
		return nil
	}
	for _, req := range *op.Security {
		var names []string
		for name := range req {
			names = append(names, name)
		}
		sort.Strings(names)
		out = append(out, strings.Join(names, "+"))
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIMatchesRouteTable fails when the server registers a route the
// document does not describe, or the document describes one the server
// does not register, or their authentication differs.
func TestOpenAPIMatchesRouteTable(t *testing.T) {
	ops := specOperations(loadSpec(t))
	registered := map[string]bool{}
	for _, rt := range api.Routes() {
		key := rt.Method + " " + rt.Path
		require.False(t, registered[key], "route %s registered twice", key)
		registered[key] = true
		op, ok := ops[key]
		if !assertTrue(t, ok, "route %s is registered but not in api/openapi.json", key) {
			continue
		}
		want, ok := securityFor[rt.Access]
		require.True(t, ok, "route %s: access %q has no expected security", key, rt.Access)
		require.NotNil(t, op.Security, "%s: the operation must declare its security explicitly (security: [] when open)", key)
		require.Equal(t, want, securityOf(op), "%s: security of the document vs the route's access %q", key, rt.Access)
	}
	for key := range ops {
		assertTrue(t, registered[key], "api/openapi.json describes %s, which the server does not register", key)
	}
	require.True(t, registered["GET /v1/openapi.json"], "the document must be served")
}

func assertTrue(t *testing.T, ok bool, format string, args ...any) bool {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}

// jsonFields returns the JSON names of t's fields (embedded structs
// flattened) and which of them are always present (no omitempty).
func jsonFields(t reflect.Type) (all, always []string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			a, w := jsonFields(f.Type)
			all, always = append(all, a...), append(always, w...)
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") {
			always = append(always, name)
		}
	}
	sort.Strings(all)
	sort.Strings(always)
	return all, always
}

// TestOpenAPISchemasMirrorProtocol checks that each component schema has
// exactly the JSON fields of the Go type it describes, and that a reply's
// schema requires exactly the fields the server always writes (those
// without omitempty). Request schemas require what validation demands, so
// only their field sets are compared.
func TestOpenAPISchemasMirrorProtocol(t *testing.T) {
	schemas := loadSpec(t).Components.Schemas
	replies := map[string]any{
		"ErrorBody": protocol.ErrorBody{}, "ErrorDetail": protocol.ErrorDetail{}, "StopOrder": protocol.StopOrder{},
		"RegisterResponse": protocol.RegisterResponse{}, "ClaimedTask": protocol.ClaimedTask{},
		"ClaimResponse": protocol.ClaimResponse{}, "HeartbeatResponse": protocol.HeartbeatResponse{},
		"CompleteResponse": protocol.CompleteResponse{}, "DAG": protocol.DAG{}, "DAGList": protocol.DAGList{},
		"ApplyDAGResponse": protocol.ApplyDAGResponse{}, "PauseDAGResponse": protocol.PauseDAGResponse{}, "BackfillResponse": protocol.BackfillResponse{}, "NextSlots": protocol.NextSlots{}, "ScheduleSlot": protocol.ScheduleSlot{}, "Run": protocol.Run{}, "LateOutcome": protocol.LateOutcome{},
		"TaskInstance": protocol.TaskInstance{}, "RunDetail": protocol.RunDetail{}, "RunList": protocol.RunList{},
		"Event": protocol.Event{}, "EventList": protocol.EventList{}, "StoredLogLine": protocol.StoredLogLine{},
		"LogList": protocol.LogList{}, "ReapCandidate": protocol.ReapCandidate{}, "ReapReport": protocol.ReapReport{},
		"Thresholds": protocol.Thresholds{}, "Agent": protocol.Agent{}, "AgentList": protocol.AgentList{},
		"VersionInfo": protocol.VersionInfo{}, "GraceNotice": protocol.GraceNotice{},
		"HealthReport": api.HealthReport{}, "MassSilenceBrake": api.MassSilenceBrake{}, "LeaderStatus": leader.Status{},
		"Session": protocol.Session{}, "AtRisk": protocol.AtRisk{}, "AtRiskRunning": protocol.AtRiskRunning{},
		"AtRiskQueued": protocol.AtRiskQueued{}, "AtRiskRun": protocol.AtRiskRun{},
		"ReaperSweep": protocol.ReaperSweep{}, "Replica": protocol.Replica{}, "Cluster": protocol.Cluster{},
		"Secret": protocol.Secret{}, "SecretList": protocol.SecretList{}, "SetSecretResponse": protocol.SetSecretResponse{},
		"ClearResponse": protocol.ClearResponse{}, "ClearedTI": protocol.ClearedTI{}, "MarkResponse": protocol.MarkResponse{},
		"MarkedTI": protocol.MarkedTI{},
		"DAGGrid":  protocol.DAGGrid{}, "GridRun": protocol.GridRun{}, "GridCell": protocol.GridCell{},
		"Pool": protocol.Pool{}, "PoolList": protocol.PoolList{}, "SetPoolResponse": protocol.SetPoolResponse{},
		"DeleteDAGResponse": protocol.DeleteDAGResponse{},
	}
	requests := map[string]any{
		"HeartbeatEntry": protocol.HeartbeatEntry{}, "RegisterRequest": protocol.RegisterRequest{},
		"ClaimRequest": protocol.ClaimRequest{}, "HeartbeatRequest": protocol.HeartbeatRequest{},
		"CompleteRequest": protocol.CompleteRequest{}, "LogLine": protocol.LogLine{}, "LogsRequest": protocol.LogsRequest{},
		"ApplyDAGRequest": protocol.ApplyDAGRequest{}, "TriggerRunRequest": protocol.TriggerRunRequest{},
		"BackfillRequest": protocol.BackfillRequest{}, "ThresholdsUpdate": protocol.ThresholdsUpdate{},
		"SessionRequest": protocol.SessionRequest{}, "SetSecretRequest": protocol.SetSecretRequest{},
		"ClearRequest": protocol.ClearRequest{}, "MarkRequest": protocol.MarkRequest{},
		"SetPoolRequest": protocol.SetPoolRequest{},
	}
	check := func(name string, v any, reply bool) {
		ref, ok := schemas[name]
		if !assertTrue(t, ok, "components/schemas has no %s", name) {
			return
		}
		s := ref.Value
		var props []string
		for p := range s.Properties {
			props = append(props, p)
		}
		sort.Strings(props)
		all, always := jsonFields(reflect.TypeOf(v))
		require.Equal(t, all, props, "schema %s: properties vs the JSON fields of %T", name, v)
		if reply {
			req := slices.Clone(s.Required)
			sort.Strings(req)
			if req == nil {
				req = []string{}
			}
			if always == nil {
				always = []string{}
			}
			require.Equal(t, always, req, "schema %s: required vs the fields %T always writes", name, v)
		} else {
			require.NotNil(t, s.AdditionalProperties.Has, "schema %s: requests are decoded strictly: additionalProperties must be false", name)
			require.False(t, *s.AdditionalProperties.Has, "schema %s: additionalProperties must be false", name)
		}
	}
	for name, v := range replies {
		check(name, v, true)
	}
	for name, v := range requests {
		check(name, v, false)
	}

	enum := func(schema, prop string) []string {
		var out []string
		for _, v := range schemas[schema].Value.Properties[prop].Value.Enum {
			out = append(out, v.(string))
		}
		return out
	}
	require.Equal(t, state.Strings(state.RunStates()), enum("Run", "state"))
	require.Equal(t, state.Strings(state.TIStates()), enum("TaskInstance", "state"))
	require.ElementsMatch(t, []string{protocol.CodeBadRequest, protocol.CodeUnauthorized, protocol.CodeForbidden,
		protocol.CodeNotFound, protocol.CodeStaleAttempt, protocol.CodeConflict, protocol.CodeNameInUse,
		protocol.CodeAgentCredential, protocol.CodeCSRF, protocol.CodeTooLarge, protocol.CodeRateLimited, protocol.CodeUnavailable, protocol.CodeInternal,
		protocol.CodeSecretsDisabled}, enum("ErrorDetail", "code"))
	require.ElementsMatch(t, state.Strings(state.StopReasons()), enum("StopOrder", "reason"))
	require.Equal(t, state.Strings(trigger.Rules()), enum("DAGTask", "trigger_rule"))
	require.ElementsMatch(t, []string{protocol.StreamStdout, protocol.StreamStderr, protocol.StreamSystem}, enum("LogLine", "stream"))
	require.ElementsMatch(t, state.Strings(state.Outcomes()), enum("CompleteRequest", "outcome"))
	require.ElementsMatch(t, append([]string{""}, state.Strings(state.AgentFailures())...), enum("CompleteRequest", "failure"))
}

// TestDocsAPIListsEveryOperation keeps docs/api.md beside the document:
// every operation appears there as "METHOD /path".
func TestDocsAPIListsEveryOperation(t *testing.T) {
	md, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	for key := range specOperations(loadSpec(t)) {
		assertTrue(t, strings.Contains(string(md), "`"+key+"`"), "docs/api.md does not mention `%s`", key)
	}
}

// TestRoutesOnlyFromTable fails when a file of package api registers a
// route with mux.Handle or HandleFunc outside the route table: such a
// route would escape TestOpenAPIMatchesRouteTable. The only literal
// pattern allowed is the catch-all "/".
func TestRoutesOnlyFromTable(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING && lit.Value != `"/"` {
				t.Errorf("%s: route %s is registered outside routeTable (api/server.go): add it to the table, "+
					"api/openapi.json and docs/api.md", fset.Position(call.Pos()), lit.Value)
			}
			return true
		})
	}
}

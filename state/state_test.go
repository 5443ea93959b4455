package state_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
)

func TestListsHaveNoDuplicates(t *testing.T) {
	assertUnique(t, "TIStates", state.TIStates())
	assertUnique(t, "RunStates", state.RunStates())
	assertUnique(t, "Reasons", state.Reasons())
	assertUnique(t, "Outcomes", state.Outcomes())
	assertUnique(t, "Failures", state.Failures())
	assert.Equal(t, slices.DeleteFunc(state.Failures(), func(f state.Failure) bool { return f == state.FailureSecretMissing }),
		state.AgentFailures(), "an agent reports every failure but the server's secret_missing")
	assertUnique(t, "StopReasons", state.StopReasons())
	assertUnique(t, "AgentStates", state.AgentStates())
	assertUnique(t, "Reapers", state.Reapers())
	assertUnique(t, "EventKinds", state.EventKinds())
	assertUnique(t, "NotifyEvents", state.NotifyEvents())
	assertUnique(t, "Deliveries", state.Deliveries())
	assertUnique(t, "WebhookFormats", state.WebhookFormats())
}

func assertUnique[T ~string](t *testing.T, name string, vs []T) {
	t.Helper()
	seen := map[T]bool{}
	for _, v := range vs {
		assert.False(t, seen[v], "%s lists %q twice", name, v)
		assert.NotEmpty(t, v, "%s lists an empty value", name)
		seen[v] = true
	}
}

// declaredConsts parses the package's non-test files and returns, for
// each of the named types, the string value of every constant declared
// with that type. Like River's TestJobStates: a constant added to a file
// but not to its list function fails the test below.
func declaredConsts(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	out := map[string][]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		require.NoError(t, err)
		declaredIn(t, f, out)
	}
	return out
}

func declaredIn(t *testing.T, f *ast.File, out map[string][]string) {
	t.Helper()
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			typ, ok := vs.Type.(*ast.Ident)
			if !ok {
				continue
			}
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				require.True(t, ok && lit.Kind == token.STRING, "%s: value is not a string literal", name.Name)
				v, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				out[typ.Name] = append(out[typ.Name], v)
			}
		}
	}
}

func TestListsHoldEveryDeclaredConstant(t *testing.T) {
	consts := declaredConsts(t)
	for _, c := range []struct {
		typ  string
		list []string
	}{
		{"TI", state.Strings(state.TIStates())},
		{"Run", state.Strings(state.RunStates())},
		{"Reason", state.Strings(state.Reasons())},
		{"Outcome", state.Strings(state.Outcomes())},
		{"Failure", state.Strings(state.Failures())},
		{"StopReason", state.Strings(state.StopReasons())},
		{"Agent", state.Strings(state.AgentStates())},
		{"Reaper", state.Strings(state.Reapers())},
		{"EventKind", state.Strings(state.EventKinds())},
		{"NotifyEvent", state.Strings(state.NotifyEvents())},
		{"Delivery", state.Strings(state.Deliveries())},
		{"WebhookFormat", state.Strings(state.WebhookFormats())},
	} {
		declared := slices.Clone(consts[c.typ])
		require.NotEmpty(t, declared, "no constants of type %s found in the package", c.typ)
		slices.Sort(declared)
		list := slices.Clone(c.list)
		slices.Sort(list)
		assert.Equal(t, declared, list, "the %s list function must list exactly the declared %s constants", c.typ, c.typ)
	}
}

func TestTIPredicates(t *testing.T) {
	terminal := []state.TI{state.TISuccess, state.TIFailed, state.TIUpstreamFailed, state.TISkipped, state.TICancelled}
	active := []state.TI{state.TIScheduled, state.TIQueued, state.TIRunning, state.TIUpForRetry}
	done := []state.TI{state.TISuccess, state.TISkipped}
	failsDependents := []state.TI{state.TIFailed, state.TIUpstreamFailed, state.TICancelled}
	culprit := []state.TI{state.TIFailed, state.TICancelled}
	dispatched := []state.TI{state.TIQueued, state.TIRunning}
	for _, s := range state.TIStates() {
		assert.Equal(t, slices.Contains(failsDependents, s), s.FailsDependents(), "%s.FailsDependents", s)
		assert.Equal(t, slices.Contains(culprit, s), s.Culprit(), "%s.Culprit", s)
		assert.Equal(t, slices.Contains(dispatched, s), s.Dispatched(), "%s.Dispatched", s)
		assert.Equal(t, slices.Contains(terminal, s), s.Terminal(), "%s.Terminal", s)
		assert.Equal(t, slices.Contains(active, s), s.Active(), "%s.Active", s)
		assert.Equal(t, slices.Contains(done, s), s.Done(), "%s.Done", s)
		assert.False(t, s.Terminal() && s.Active(), "%s is both terminal and active", s)
		if s.Done() {
			assert.True(t, s.Terminal(), "%s is done but not terminal", s)
		}
	}
	// none is neither: it waits for its upstreams.
	assert.False(t, state.TINone.Terminal() || state.TINone.Active())
	assert.False(t, state.TI("bogus").Terminal() || state.TI("bogus").Active() || state.TI("bogus").Done())
}

func TestRunTerminal(t *testing.T) {
	want := map[state.Run]bool{state.RunQueued: false, state.RunRunning: false,
		state.RunSuccess: true, state.RunFailed: true, state.RunCancelled: true}
	require.Len(t, want, len(state.RunStates()))
	for _, s := range state.RunStates() {
		assert.Equal(t, want[s], s.Terminal(), "%s.Terminal", s)
		assert.Equal(t, !want[s], s.Live(), "%s.Live", s)
	}
}

func TestWhere(t *testing.T) {
	assert.Equal(t, []state.TI{state.TIScheduled, state.TIQueued, state.TIRunning, state.TIUpForRetry},
		state.Where(state.TIStates(), state.TI.Active))
	assert.Equal(t, []state.Run{state.RunQueued, state.RunRunning}, state.Where(state.RunStates(), state.Run.Live))
	assert.Nil(t, state.Where(state.RunStates(), func(state.Run) bool { return false }))
}

func TestTransitionsUseKnownStatesAndActors(t *testing.T) {
	actors := []state.Actor{state.ActorScheduler, state.ActorAgent, state.ActorReaper, state.ActorOperator,
		state.ActorLateComplete}
	seen := map[state.Transition]bool{}
	for _, tr := range state.TITransitions {
		assert.Contains(t, state.TIStates(), tr.From, "%+v", tr)
		assert.Contains(t, state.TIStates(), tr.To, "%+v", tr)
		assert.Contains(t, actors, tr.By, "%+v", tr)
		assert.NotEqual(t, tr.From, tr.To, "%+v is not a move", tr)
		assert.False(t, seen[tr], "%+v is listed twice", tr)
		seen[tr] = true
		// Only a late completion (docs/design.md §6) or an operator's
		// clear or mark (docs/rerun.md) moves a TI out of a terminal state.
		if tr.From.Terminal() {
			assert.Contains(t, []state.Actor{state.ActorLateComplete, state.ActorOperator}, tr.By,
				"%+v leaves a terminal state", tr)
		}
		// No operator's move touches a TI an agent may hold: a clear or
		// mark of a queued or running TI is refused.
		if tr.By == state.ActorOperator {
			assert.False(t, tr.From.Dispatched(), "%+v takes a TI from its agent", tr)
		}
	}
}

func TestAllowed(t *testing.T) {
	for _, tr := range state.TITransitions {
		assert.True(t, state.Allowed(tr.From, tr.To, tr.By), "%+v is listed", tr)
	}
	for _, c := range []struct {
		from, to state.TI
		by       state.Actor
		want     bool
	}{
		{state.TIQueued, state.TIRunning, state.ActorAgent, true},
		{state.TIQueued, state.TIRunning, state.ActorScheduler, false}, // only a claim starts work
		{state.TINone, state.TIRunning, state.ActorAgent, false},
		{state.TISuccess, state.TIRunning, state.ActorAgent, false},
		{state.TIRunning, state.TISuccess, state.ActorReaper, false}, // a reaper never invents success
		{state.TIFailed, state.TISuccess, state.ActorAgent, false},   // only as a late completion
		{state.TIFailed, state.TISuccess, state.ActorLateComplete, true},
		{state.TISkipped, state.TISuccess, state.ActorLateComplete, false},
		{state.TIFailed, state.TINone, state.ActorOperator, true}, // clear
		{state.TIRunning, state.TINone, state.ActorOperator, false},
		{state.TIQueued, state.TINone, state.ActorOperator, false},
		{state.TICancelled, state.TINone, state.ActorOperator, false}, // a cancelled run is not cleared
		{state.TIFailed, state.TISuccess, state.ActorOperator, true},  // mark
		{state.TIRunning, state.TISuccess, state.ActorOperator, false},
		{state.TIQueued, state.TIFailed, state.ActorOperator, false},
	} {
		assert.Equal(t, c.want, state.Allowed(c.from, c.to, c.by), "%s -> %s by %s", c.from, c.to, c.by)
	}
}

// Cancellation is implied from every non-terminal state, by the operator
// or the run-timeout reaper only, and never out of a terminal state.
func TestAllowedCancellation(t *testing.T) {
	for _, from := range state.TIStates() {
		for _, by := range []state.Actor{state.ActorOperator, state.ActorReaper} {
			assert.Equal(t, !from.Terminal(), state.Allowed(from, state.TICancelled, by), "%s -> cancelled by %s", from, by)
		}
		for _, by := range []state.Actor{state.ActorScheduler, state.ActorAgent, state.ActorLateComplete} {
			assert.False(t, state.Allowed(from, state.TICancelled, by), "%s -> cancelled by %s", from, by)
		}
	}
}

func TestStrings(t *testing.T) {
	assert.Equal(t, []string{"queued", "running"}, state.Strings([]state.Run{state.RunQueued, state.RunRunning}))
	assert.Equal(t, []string{}, state.Strings[state.TI](nil))
}

package store

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
)

// sqlText is one SQL statement or fragment as a file spells it: its string
// literals joined, with hole standing for each operand that is not a
// literal (a fragment, a constant, a call).
type sqlText struct {
	pos  token.Position
	text string
}

const hole = "\x00"

// sqlTexts returns the SQL texts of the package's non-test files: every
// string literal, or chain of literals and other operands joined by +,
// that reads as SQL.
func sqlTexts(t *testing.T) []sqlText {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var out []sqlText
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		out = append(out, sqlTextsIn(fset, f)...)
	}
	require.NotEmpty(t, out)
	return out
}

// looksLikeSQL matches a text with a statement keyword.
var looksLikeSQL = regexp.MustCompile(`\b(SELECT|UPDATE|INSERT|DELETE|WHERE|WITH)\b`)

func sqlTextsIn(fset *token.FileSet, f *ast.File) []sqlText {
	var out []sqlText
	var visit func(n ast.Node) bool
	visit = func(n ast.Node) bool {
		var text string
		switch e := n.(type) {
		case *ast.BinaryExpr:
			if e.Op != token.ADD {
				return true
			}
			var parts []string
			for _, op := range flattenAdd(e) {
				if lit, ok := op.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					parts = append(parts, s)
					continue
				}
				parts = append(parts, hole)
				ast.Inspect(op, visit) // a call among the operands may hold SQL of its own
			}
			text = strings.Join(parts, "")
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return true
			}
			text, _ = strconv.Unquote(e.Value)
		default:
			return true
		}
		if looksLikeSQL.MatchString(text) {
			out = append(out, sqlText{pos: fset.Position(n.Pos()), text: text})
		}
		return false
	}
	ast.Inspect(f, visit)
	return out
}

// flattenAdd returns the operands of a chain a + b + c, left to right.
func flattenAdd(e ast.Expr) []ast.Expr {
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.ADD {
		return append(flattenAdd(b.X), flattenAdd(b.Y)...)
	}
	if p, ok := e.(*ast.ParenExpr); ok {
		return flattenAdd(p.X)
	}
	return []ast.Expr{e}
}

// quotedWord matches a SQL string literal holding one lower-case word,
// the shape of every state, reason and event kind; literals with spaces
// or punctuation are message text.
var quotedWord = regexp.MustCompile(`'([a-z][a-z0-9_]*)'`)

// typedWords is every value of package state's lists, and the store's
// own run types and stamp columns.
func typedWords() map[string]string {
	words := map[string]string{}
	add := func(kind string, vs []string) {
		for _, v := range vs {
			words[v] = kind
		}
	}
	add("state.TI", state.Strings(state.TIStates()))
	add("state.Run", state.Strings(state.RunStates()))
	add("state.Reason", state.Strings(state.Reasons()))
	add("state.Agent", state.Strings(state.AgentStates()))
	add("state.EventKind", state.Strings(state.EventKinds()))
	add("state.NotifyEvent", state.Strings(state.NotifyEvents()))
	add("state.Delivery", state.Strings(state.Deliveries()))
	add("run type", []string{RunManual, RunScheduled, RunBackfill})
	add("stamp column", []string{StampHeartbeat, StampQueued, StampStarted})
	return words
}

// otherWords are the single-word SQL literals that are no state, reason
// or kind, each with where it comes from. A new one is added here
// deliberately; a misspelt state is not.
var otherWords = map[string]string{
	"schedule":                            "dags.spec key",
	"timezone":                            "dags.spec key",
	"start_date":                          "dags.spec key",
	"tasks":                               "dags.spec key",
	"id":                                  "dags.spec task key",
	"pool":                                "dags.spec task key",
	"leader_epoch_seq":                    "sequence name",
	"reset":                               "fence_domain_log.action",
	"sweep":                               "ChanReap payload",
	"lock_timeout":                        "pg_settings name",
	"statement_timeout":                   "pg_settings name",
	"idle_in_transaction_session_timeout": "pg_settings name",
}

// unknownWords returns each single-word literal of texts that is neither
// a typed value nor one of otherWords, as "file:line: 'word'".
func unknownWords(texts []sqlText) []string {
	words := typedWords()
	var bad []string
	for _, s := range texts {
		for _, m := range quotedWord.FindAllStringSubmatch(s.text, -1) {
			if _, ok := words[m[1]]; ok {
				continue
			}
			if _, ok := otherWords[m[1]]; ok {
				continue
			}
			bad = append(bad, fmt.Sprintf("%s:%d: '%s'", s.pos.Filename, s.pos.Line, m[1]))
		}
	}
	return bad
}

// Every quoted single word in the store's SQL is a value of package
// state's typed lists (or a named non-state word): a misspelt or retired
// state, reason or event kind fails here instead of matching no row.
func TestSQLLiteralsAreTypedValues(t *testing.T) {
	assert.Empty(t, unknownWords(sqlTexts(t)),
		"SQL literals that are no typed value: use package state's constants (or add a non-state word to otherWords)")
}

// The check above finds a bogus state in a statement, in a fragment joined
// to one, and not in message text.
func TestUnknownWordsFindsABogusState(t *testing.T) {
	texts := []sqlText{
		{text: `UPDATE task_instances SET state = 'runnning' WHERE state = 'queued'`},
		{text: `SELECT 1 FROM runs WHERE state IN ` + hole + ` AND reason = 'orphanned'`},
		{text: `SELECT 'task ' || 'was running: ' || kind FROM events WHERE kind = 'ti_claimed'`},
	}
	assert.Equal(t, []string{":0: 'runnning'", ":0: 'orphanned'"}, unknownWords(texts))
}

// setClause is the SET list of a task_instances UPDATE, up to its FROM,
// WHERE or RETURNING; literalState finds state = '…' in it (not t.state:
// a qualified column is a CASE's condition).
var (
	setClause    = regexp.MustCompile(`(?s)^UPDATE\s+task_instances\b.*?\bSET\b(.*?)\b(?:FROM|WHERE|RETURNING)\b`)
	literalState = regexp.MustCompile(`(?:^|[\s,])state\s*=\s*'`)
)

// literalTIMoves returns the statements of texts that write a TI state
// spelled as a literal rather than through a move.
func literalTIMoves(texts []sqlText) []string {
	var bad []string
	for _, s := range texts {
		for _, stmt := range strings.Split(s.text, "UPDATE ")[1:] {
			stmt = "UPDATE " + stmt
			if m := setClause.FindStringSubmatch(stmt); m != nil && literalState.MatchString(m[1]) {
				bad = append(bad, fmt.Sprintf("%s:%d: %.60q", s.pos.Filename, s.pos.Line, stmt))
			}
		}
	}
	return bad
}

// Every statement that sets a task instance's state takes it from a move
// (mustMove: checked against state.TITransitions) or from data checked by
// checkMove (a completion, a reap); none spells the target state out.
func TestTIStateWritesGoThroughMoves(t *testing.T) {
	assert.Empty(t, literalTIMoves(sqlTexts(t)))
	assert.Len(t, literalTIMoves([]sqlText{
		{text: `WITH a AS (UPDATE agents SET state = 'active') UPDATE task_instances t SET state = 'running' WHERE t.id = 1`},
		{text: `UPDATE task_instances SET state = ` + hole + ` WHERE state IN ` + hole},
		{text: `UPDATE task_instances SET state = $3 WHERE id = $1`},
	}), 1, "only the literal write is found")
}

// Every move the store writes is one state.Allowed allows; mustMove
// refuses any other, so a statement cannot be built around it.
func TestMustMoveRefusesMovesTheTableDoesNot(t *testing.T) {
	assert.PanicsWithValue(t, "store: agent may not move a task instance from success to running (state.TITransitions)",
		func() { mustMove(state.ActorAgent, state.TIRunning, state.TIQueued, state.TISuccess) })
	assert.Panics(t, func() { mustMove(state.ActorScheduler, state.TIRunning) }, "no from state")
	m := mustMove(state.ActorScheduler, state.TIQueued, state.TINone, state.TIScheduled)
	assert.Equal(t, "'queued'", m.To())
	assert.Equal(t, "('none', 'scheduled')", m.From())
	assert.NoError(t, checkMove(state.TIRunning, state.TIUpForRetry, state.ActorReaper))
	assert.EqualError(t, checkMove(state.TIRunning, state.TISuccess, state.ActorReaper),
		"reaper may not move a task instance from running to success (state.TITransitions)")
}

// The rendered sets are the typed lists' members, quoted.
func TestStateSetsRenderTheTypedLists(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want []string
	}{
		{tiTerminalSQL, []string{"success", "failed", "upstream_failed", "skipped", "cancelled"}},
		{tiActiveSQL, []string{"scheduled", "queued", "running", "up_for_retry"}},
		{tiDoneSQL, []string{"success", "skipped"}},
		{tiFailsDependentsSQL, []string{"failed", "upstream_failed", "cancelled"}},
		{tiCulpritSQL, []string{"failed", "cancelled"}},
		{tiDispatchedSQL, []string{"queued", "running"}},
		{runTerminalSQL, []string{"success", "failed", "cancelled"}},
		{runLiveSQL, []string{"queued", "running"}},
		{agentIdleSQL, []string{"inactive", "deregistered"}},
	} {
		var got []string
		for _, m := range quotedWord.FindAllStringSubmatch(c.sql, -1) {
			got = append(got, m[1])
		}
		assert.Equal(t, c.want, got, c.sql)
		assert.True(t, strings.HasPrefix(c.sql, "(") && strings.HasSuffix(c.sql, ")"), c.sql)
	}
	assert.Equal(t, `'it''s'`, sqlValue("it's"))
}

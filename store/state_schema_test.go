package store_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store/storetest"
)

// checkConstraint is one CHECK constraint on a single column, as the
// migrated database defines it.
type checkConstraint struct {
	table, column, name, def string
}

// columnChecks reads every CHECK constraint of the migrated schema that
// constrains exactly one of the given table columns.
func columnChecks(t *testing.T, ctx context.Context, conn *pgx.Conn) []checkConstraint {
	t.Helper()
	rows, err := conn.Query(ctx, `
		SELECT c.conrelid::regclass::text, a.attname, c.conname, pg_get_constraintdef(c.oid)
		  FROM pg_constraint c
		  JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
		 WHERE c.contype = 'c' AND cardinality(c.conkey) = 1
		   AND c.conrelid IN ('task_instances'::regclass, 'runs'::regclass, 'agents'::regclass,
		                      'notifications'::regclass, 'dag_notify'::regclass, 'webhooks'::regclass)
		   AND a.attname IN ('state', 'reason', 'event', 'format')
		 ORDER BY 1, 2, 3`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (checkConstraint, error) {
		var c checkConstraint
		err := r.Scan(&c.table, &c.column, &c.name, &c.def)
		return c, err
	})
	require.NoError(t, err)
	return out
}

// quoted matches a SQL string literal; a doubled quote inside it stands
// for one quote.
var quoted = regexp.MustCompile(`'((?:[^']|'')*)'`)

// literals returns the sorted string literals of a constraint definition,
// e.g. CHECK ((state = ANY (ARRAY['queued'::text, 'running'::text]))).
func literals(def string) []string {
	var out []string
	for _, m := range quoted.FindAllStringSubmatch(def, -1) {
		out = append(out, strings.ReplaceAll(m[1], "''", "'"))
	}
	slices.Sort(out)
	return out
}

func sorted(vs []string) []string {
	out := slices.Clone(vs)
	slices.Sort(out)
	return out
}

// Every CHECK constraint on task_instances.state, task_instances.reason,
// runs.state, runs.reason, agents.state and the notification tables'
// event, state and format columns in a migrated database allows
// exactly the values package state lists (adr/0013-state-package.md): a
// state or reason added on one side only fails here.
func TestCheckConstraintsMatchStatePackage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storetest.DB(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	want := map[string][]string{
		"task_instances.state":  sorted(state.Strings(state.TIStates())),
		"task_instances.reason": sorted(state.Strings(state.Reasons())),
		"runs.state":            sorted(state.Strings(state.RunStates())),
		"runs.reason":           sorted(state.Strings(state.Reasons())),
		"agents.state":          sorted(state.Strings(state.AgentStates())),
		"notifications.state":   sorted(state.Strings(state.Deliveries())),
		"notifications.event":   sorted(state.Strings(state.NotifyEvents())),
		"dag_notify.event":      sorted(state.Strings(state.NotifyEvents())),
		"webhooks.format":       sorted(state.Strings(state.WebhookFormats())),
	}
	found := map[string]int{}
	for _, c := range columnChecks(t, ctx, conn) {
		col := c.table + "." + c.column
		t.Logf("%s %s: %s", col, c.name, c.def)
		found[col]++
		assert.Equal(t, want[col], literals(c.def), "constraint %s on %s: %s", c.name, col, c.def)
	}
	for col := range want {
		assert.Positive(t, found[col], "no CHECK constraint on %s", col)
	}
}

func TestLiterals(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []string{"a'b", "queued", "running"},
		literals(`CHECK ((state = ANY (ARRAY['running'::text, 'queued'::text, 'a''b'::text])))`))
	assert.Empty(t, literals(`CHECK ((capacity > 0))`))
}

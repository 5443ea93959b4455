package store_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestUpstreamOutputsPlanIsLookups: the read of a claim's inputs looks up
// the claimed TIs, their upstreams and their outputs by key, and the read
// of a run's outputs its TIs by run and their outputs by key, whatever
// the planner thinks of the tables: over 21 runs of a fan-out DAG (2,121
// TIs, 2,021 of them success with outputs) it scans neither
// task_instances nor ti_outputs, before and after ANALYZE. (A plain join, with the
// statistics of a young table, scanned every success TI: 230 ms for a
// claim of 100 on 1,010 TIs, against 1.7 ms for the lookups.)
func TestUpstreamOutputsPlanIsLookups(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	agentID := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 1000})
	var spec strings.Builder
	spec.WriteString("dag_id: fan\nmax_active_tasks: 1000\ntasks:\n  - {id: root, command: [\"true\"]}\n")
	for i := range 100 {
		fmt.Fprintf(&spec, "  - {id: t%03d, command: [\"true\"], depends_on: [root]}\n", i)
	}
	e.apply(spec.String())
	zero := 0
	var ids []int64
	var runID int64
	for r := range 21 {
		runID = e.trigger("fan")
		e.tick()
		root, err := e.st.Claim(e.ctx, agentID, 1)
		require.NoError(t, err)
		res := e.st.CompleteBatch(e.ctx, agentID, []store.Completion{{Attempt: root[0].Attempt, Outcome: state.OutcomeSuccess,
			ExitCode: &zero, Outputs: map[string]string{"path": "/x", "rows": "12"}}})
		require.NoError(t, res[0].Err)
		e.tick()
		down, err := e.st.Claim(e.ctx, agentID, 100)
		require.NoError(t, err)
		require.Len(t, down, 100)
		ids = ids[:0]
		var batch []store.Completion
		for _, d := range down {
			ids = append(ids, d.TIID)
			batch = append(batch, store.Completion{Attempt: d.Attempt, Outcome: state.OutcomeSuccess, ExitCode: &zero,
				Outputs: map[string]string{"n": "1"}})
		}
		if r < 20 {
			e.st.CompleteBatch(e.ctx, agentID, batch)
		}
	}
	in, err := e.st.UpstreamOutputs(e.ctx, ids, 1<<20)
	require.NoError(t, err)
	require.Len(t, in, 100)
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			_, err := e.raw.Exec(e.ctx, `ANALYZE task_instances; ANALYZE ti_outputs`)
			require.NoError(t, err)
		}
		for name, q := range map[string]struct {
			sql  string
			args []any
		}{
			"claim inputs": {store.UpstreamOutputsSQL, []any{ids, 1 << 20}},
			"run outputs":  {store.RunOutputsSQL, []any{runID, "", -1, store.OutputsPageBytes, store.OutputsPageMax}},
		} {
			rows, err := e.raw.Query(e.ctx, "EXPLAIN "+q.sql, q.args...)
			require.NoError(t, err)
			var plan []string
			for rows.Next() {
				var l string
				require.NoError(t, rows.Scan(&l))
				plan = append(plan, l)
			}
			require.NoError(t, rows.Err())
			text := strings.Join(plan, "\n")
			assert.NotContains(t, text, "Seq Scan on task_instances", "%s, analyzed %v:\n%s", name, analyzed, text)
			assert.NotContains(t, text, "Seq Scan on ti_outputs", "%s, analyzed %v:\n%s", name, analyzed, text)
		}
	}
}

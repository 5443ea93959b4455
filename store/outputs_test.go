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

// TestOutputsReachDownstreamAndANewTryReplacesThem: a success stores its
// outputs, through the batch and through the single path, in the
// statement that records it; the downstream's claim reads them from its
// upstreams; a cleared TI shows none until its new try succeeds, whose
// outputs replace the old ones; a failure's outputs are never stored.
func TestOutputsReachDownstreamAndANewTryReplacesThem(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	agentID := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 10})
	e.apply("dag_id: o\ntasks:\n" +
		"  - {id: a, command: [\"true\"]}\n  - {id: b, command: [\"true\"]}\n" +
		"  - {id: c, command: [\"true\"], depends_on: [a, b]}\n  - {id: d, command: [\"true\"], retries: 1}\n")
	runID := e.trigger("o")
	e.tick()
	claimed, err := e.st.Claim(e.ctx, agentID, 3)
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	by := map[string]store.ClaimedTask{}
	for _, c := range claimed {
		by[c.TaskID] = c
		assert.False(t, c.HasUpstream, c.TaskID)
	}
	zero, one := 0, 1
	res := e.st.CompleteBatch(e.ctx, agentID, []store.Completion{
		{Attempt: by["a"].Attempt, Outcome: state.OutcomeSuccess, ExitCode: &zero, Outputs: map[string]string{"path": "/x.csv", "rows": "12"}},
		{Attempt: by["d"].Attempt, Outcome: state.OutcomeFailed, ExitCode: &one, Outputs: map[string]string{"never": "stored"}},
	})
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	_, _, err = e.st.Complete(e.ctx, agentID, store.Completion{Attempt: by["b"].Attempt, Outcome: state.OutcomeSuccess,
		ExitCode: &zero, Outputs: map[string]string{"ok": "multi\nline"}})
	require.NoError(t, err)
	assert.Equal(t, 0, e.count(`SELECT count(*) FROM ti_outputs WHERE ti_id = $1`, by["d"].TIID), "a failure's outputs")

	e.tick()
	down, err := e.st.Claim(e.ctx, agentID, 3)
	require.NoError(t, err)
	require.Len(t, down, 2) // c, and d's retry
	var c store.ClaimedTask
	for _, t := range down {
		if t.TaskID == "c" {
			c = t
		}
	}
	require.True(t, c.HasUpstream)
	in, err := e.st.UpstreamOutputs(e.ctx, []int64{c.TIID, by["a"].TIID}, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, map[int64]store.UpstreamInputs{c.TIID: {Bytes: 4 + 6 + 4 + 2 + 2 + 10, Outputs: map[string]map[string]string{
		"a": {"path": "/x.csv", "rows": "12"}, "b": {"ok": "multi\nline"}}}}, in, "a TI without upstream outputs is absent")
	in, err = e.st.UpstreamOutputs(e.ctx, []int64{c.TIID}, 27)
	require.NoError(t, err)
	assert.Equal(t, map[int64]store.UpstreamInputs{c.TIID: {Bytes: 28}}, in, "over the bound: the total, no outputs")

	all, more, err := e.st.RunOutputs(e.ctx, runID, "", -1)
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.False(t, more)
	assert.Equal(t, store.TIOutputs{TIID: by["a"].TIID, TaskID: "a", Ordinal: all[0].Ordinal, TryNumber: 1, Bytes: 16,
		Outputs: map[string]string{"path": "/x.csv", "rows": "12"}}, all[0])
	assert.Equal(t, "b", all[1].TaskID)
	rest, more, err := e.st.RunOutputs(e.ctx, runID, "", all[0].Ordinal)
	require.NoError(t, err)
	assert.False(t, more)
	assert.Equal(t, all[1:], rest, "the page after a's ordinal")

	// Cleared (as a clear leaves it: state none, the same try_number): no
	// outputs, for readers and downstreams alike.
	_, err = e.raw.Exec(e.ctx, `UPDATE task_instances SET state = 'none', attempt_id = NULL, end_date = NULL WHERE id = $1`, by["a"].TIID)
	require.NoError(t, err)
	only, _, err := e.st.RunOutputs(e.ctx, runID, "a", -1)
	require.NoError(t, err)
	assert.Empty(t, only)
	in, err = e.st.UpstreamOutputs(e.ctx, []int64{c.TIID}, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, map[string]map[string]string{"b": {"ok": "multi\nline"}}, in[c.TIID].Outputs)

	// Its new try's success replaces them.
	_, err = e.raw.Exec(e.ctx, `INSERT INTO run_dirty (run_id) VALUES ($1)`, runID)
	require.NoError(t, err)
	e.tick()
	again, err := e.st.Claim(e.ctx, agentID, 1)
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, "a", again[0].TaskID)
	require.Equal(t, 2, again[0].TryNumber)
	res = e.st.CompleteBatch(e.ctx, agentID, []store.Completion{
		{Attempt: again[0].Attempt, Outcome: state.OutcomeSuccess, ExitCode: &zero, Outputs: map[string]string{"path": "/y.csv"}}})
	require.NoError(t, res[0].Err)
	only, _, err = e.st.RunOutputs(e.ctx, runID, "a", -1)
	require.NoError(t, err)
	assert.Equal(t, []store.TIOutputs{{TIID: by["a"].TIID, TaskID: "a", Ordinal: all[0].Ordinal, TryNumber: 2, Bytes: 10,
		Outputs: map[string]string{"path": "/y.csv"}}}, only)
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM ti_outputs WHERE ti_id = $1`, by["a"].TIID))

	// Cleared, then marked success by hand (as tasks mark leaves it:
	// success, reason marked, the same try_number): it did not run, so it
	// has no outputs, though the row of its try 2 is still there.
	_, err = e.raw.Exec(e.ctx, `UPDATE task_instances SET reason = 'marked' WHERE id = $1`, by["a"].TIID)
	require.NoError(t, err)
	only, _, err = e.st.RunOutputs(e.ctx, runID, "a", -1)
	require.NoError(t, err)
	assert.Empty(t, only)
	in, err = e.st.UpstreamOutputs(e.ctx, []int64{c.TIID}, 1<<20)
	require.NoError(t, err)
	assert.NotContains(t, in[c.TIID].Outputs, "a")

	_, _, err = e.st.RunOutputs(e.ctx, runID, "nope", -1)
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, _, err = e.st.RunOutputs(e.ctx, runID+100, "", -1)
	assert.ErrorIs(t, err, store.ErrNotFound)
}

// TestRunOutputsPagesAreBounded: a page of a run's outputs stops once it
// holds OutputsPageBytes of keys and values, says there is more, and the
// next page, after its last task's ordinal, holds the rest.
func TestRunOutputsPagesAreBounded(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	agentID := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 100})
	const n = 66 // 64 fill a page
	var spec strings.Builder
	spec.WriteString("dag_id: wide\nmax_active_tasks: 100\ntasks:\n")
	for i := range n {
		fmt.Fprintf(&spec, "  - {id: t%02d, command: [\"true\"]}\n", i)
	}
	e.apply(spec.String())
	runID := e.trigger("wide")
	e.tick()
	claimed, err := e.st.Claim(e.ctx, agentID, n)
	require.NoError(t, err)
	require.Len(t, claimed, n)
	zero := 0
	full := map[string]string{"v": strings.Repeat("x", 64<<10-1)} // 64 KiB of key and value
	var batch []store.Completion
	for _, c := range claimed {
		batch = append(batch, store.Completion{Attempt: c.Attempt, Outcome: state.OutcomeSuccess, ExitCode: &zero, Outputs: full})
	}
	for _, r := range e.st.CompleteBatch(e.ctx, agentID, batch) {
		require.NoError(t, r.Err)
	}
	first, more, err := e.st.RunOutputs(e.ctx, runID, "", -1)
	require.NoError(t, err)
	assert.True(t, more)
	require.Len(t, first, store.OutputsPageBytes/(64<<10))
	assert.Equal(t, "t00", first[0].TaskID)
	rest, more, err := e.st.RunOutputs(e.ctx, runID, "", first[len(first)-1].Ordinal)
	require.NoError(t, err)
	assert.False(t, more)
	require.Len(t, rest, n-len(first))
	assert.Equal(t, "t64", rest[0].TaskID)
	assert.Equal(t, full, rest[1].Outputs)
}

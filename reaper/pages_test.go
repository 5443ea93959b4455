package reaper_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
)

// One pass keeps listing while whole pages land, so a backlog of stale
// rows larger than the batch is reaped in one pass, each row with its own
// event and decision.
func TestOnePassReapsPageAfterPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperAgentLost)
	e.reapers = e.reapersWith(batchOf(3))
	e.apply("dag_id: seven\nmax_active_tasks: 7\ntasks:\n" +
		"  - id: a\n    command: [\"true\"]\n  - id: b\n    command: [\"true\"]\n  - id: c\n    command: [\"true\"]\n" +
		"  - id: d\n    command: [\"true\"]\n  - id: e\n    command: [\"true\"]\n  - id: f\n    command: [\"true\"]\n" +
		"  - id: g\n    command: [\"true\"]\n")
	runID := e.trigger("seven")
	agent := e.register("w", nil, 7)
	tasks := e.claim(agent, 7)
	require.Len(t, tasks, 7)
	e.started(agent, tasks...)

	rep := e.sweepAt(e.dbNow().Add(10*time.Minute), e.oldTerm())
	assert.Len(t, rep.Candidates, 7, "pages of 3, 3 and 1")
	for _, c := range rep.Candidates {
		assert.True(t, c.Applied)
	}
	assert.Equal(t, 7.0, e.decisions("agent_lost"))
	n := 0
	for _, k := range e.eventKinds(runID) {
		if k == "agent_lost" {
			n++
		}
	}
	assert.Equal(t, 7, n, "one event per reaped TI")
}

// The same for a reaper whose plans are written one at a time (the
// orphan reaper's run finalization): a full page that landed is followed
// by the next, so five finalizable runs with a batch of 2 all end in one
// pass.
func TestOnePassFinalizesOrphansPageAfterPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.only(state.ReaperOrphan)
	e.reapers = e.reapersWith(batchOf(2))
	e.apply("dag_id: one\nmax_active_runs: 5\ntasks:\n  - id: a\n    command: [\"true\"]\n")
	var runs []int64
	for range 5 {
		runs = append(runs, e.trigger("one"))
	}
	// Each left running with every TI terminal (a crash between the last
	// completion and finalization), written after the last trigger's tick.
	e.exec(`UPDATE task_instances SET state = 'success' WHERE run_id = ANY ($1)`, runs)
	e.idle(runs...)

	rep := e.sweepAt(e.dbNow().Add(6*time.Minute), e.oldTerm())
	assert.Len(t, rep.Candidates, 5, "pages of 2, 2 and 1")
	for _, c := range rep.Candidates {
		assert.True(t, c.Applied)
	}
	for _, id := range runs {
		assert.Equal(t, state.RunSuccess, e.run(id).State)
	}
	assert.Equal(t, 5.0, e.decisions("orphan_finalized"))
}

package reaper_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/reaper/reapertest"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const epoch = 1

// env is a real database with a fenced epoch, reapers on a fake clock,
// and a raw pool for seeding rows the public API cannot produce (the
// states a crash leaves behind).
type env struct {
	t       *testing.T
	ctx     context.Context
	url     string // the test's database
	store   *store.Store
	raw     *pgxpool.Pool
	metrics *metrics.Metrics
	clock   *reapertest.Clock
	reapers *reaper.Reapers
	th      reaper.Thresholds
	focus   map[state.Reaper]bool // reapers whose candidates sweepAt reports
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	url := storetest.DB(t)
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	raw, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(raw.Close)
	require.NoError(t, st.AcquireFence(ctx, epoch, "test"))
	e := &env{t: t, ctx: ctx, url: url, store: st, raw: raw, metrics: metrics.New(), clock: reapertest.NewClock(time.Time{}), th: reaper.DefaultThresholds(),
		focus: map[state.Reaper]bool{state.ReaperAgentLost: true, state.ReaperDispatchLost: true, state.ReaperOrphan: true}}
	e.reapers = e.reapersOn(st, e.clock)
	return e
}

// reapersOn builds reapers on st and clock with e's thresholds and
// metrics, each edit applied to the config first (a batch size, a
// logger, the mass-silence brake).
func (e *env) reapersOn(st *store.Store, clock reaper.Clock, edits ...func(*reaper.Config)) *reaper.Reapers {
	cfg := reaper.Config{
		Store: st, Metrics: e.metrics, Clock: clock, Thresholds: func() reaper.Thresholds { return e.th },
		Logger: slog.New(slog.DiscardHandler),
	}
	for _, edit := range edits {
		edit(&cfg)
	}
	r, err := reaper.New(cfg)
	require.NoError(e.t, err)
	return r
}

// reapersWith is reapersOn e's store and clock.
func (e *env) reapersWith(edit func(*reaper.Config)) *reaper.Reapers {
	return e.reapersOn(e.store, e.clock, edit)
}

// batchOf sets a config's page size.
func batchOf(n int) func(*reaper.Config) { return func(c *reaper.Config) { c.Batch = n } }

// dbNow is the database clock.
func (e *env) dbNow() time.Time {
	now, err := e.store.Now(e.ctx)
	require.NoError(e.t, err)
	return now
}

// oldTerm is a term that has led long enough for any threshold.
func (e *env) oldTerm() reaper.Term {
	return reaper.Term{Epoch: epoch, GraceStart: e.dbNow().Add(-24 * time.Hour)}
}

func (e *env) apply(yaml string) {
	spec, err := dag.Parse([]byte(yaml))
	require.NoError(e.t, err)
	_, err = e.store.ApplyDAG(e.ctx, spec)
	require.NoError(e.t, err)
}

// trigger creates a run and drives the scheduler steps until its ready
// TIs are queued.
func (e *env) trigger(dagID string) int64 {
	run, err := e.store.TriggerRun(e.ctx, dagID)
	require.NoError(e.t, err)
	e.schedule()
	return run.ID
}

// schedule runs the incremental scheduler until its queue is drained.
func (e *env) schedule() {
	for {
		res, err := e.store.ScheduleDirty(e.ctx, epoch, 1000)
		require.NoError(e.t, err)
		if res.Runs == 0 {
			return
		}
	}
}

// ageHeartbeat sets a TI's last heartbeat to now − d and keeps its agent's
// oldest_heartbeat_at no later than that, as claims and heartbeats do: a
// TI whose agent stopped reporting it.
func (e *env) ageHeartbeat(where string, d time.Duration, arg any) {
	e.exec(`WITH t AS (UPDATE task_instances SET last_heartbeat_at = now() - $2 * interval '1 microsecond'
	         WHERE `+where+` RETURNING agent_id, last_heartbeat_at)
	        UPDATE agents a SET oldest_heartbeat_at = least(a.oldest_heartbeat_at, t.last_heartbeat_at)
	          FROM t WHERE a.id = t.agent_id`, arg, d.Microseconds())
}

// idle marks runs the way the scheduler marks a run it cannot move (no
// active TI, not finalizable): the orphan reaper's candidates. Tests that
// forge TI states with raw SQL use it, since the scheduler never saw them.
func (e *env) idle(runIDs ...int64) {
	e.exec(`UPDATE runs SET idle_since = now() WHERE id = ANY ($1)`, runIDs)
}

func (e *env) register(name string, tags []string, capacity int) int64 {
	id := storetest.Agent(e.t, e.store, store.Registration{Name: name, Tags: tags, Capacity: capacity})
	return id
}

func (e *env) claim(agentID int64, n int) []store.ClaimedTask {
	tasks, err := e.store.Claim(e.ctx, agentID, n)
	require.NoError(e.t, err)
	return tasks
}

func (e *env) started(agentID int64, tasks ...store.ClaimedTask) {
	entries := make([]store.HeartbeatEntry, len(tasks))
	for i, t := range tasks {
		entries[i] = store.HeartbeatEntry{Attempt: t.Attempt, Started: true}
	}
	stops, _, err := e.store.Heartbeat(e.ctx, agentID, entries)
	require.NoError(e.t, err)
	require.Empty(e.t, stops)
}

func (e *env) exec(sql string, args ...any) {
	_, err := e.raw.Exec(e.ctx, sql, args...)
	require.NoError(e.t, err)
}

func (e *env) ti(runID int64, taskID string) store.TaskInstance {
	d, err := e.store.GetRun(e.ctx, runID)
	require.NoError(e.t, err)
	for _, ti := range d.TaskInstances {
		if ti.TaskID == taskID {
			return ti
		}
	}
	e.t.Fatalf("no task %s in run %d", taskID, runID)
	return store.TaskInstance{}
}

func (e *env) run(runID int64) store.RunDetail {
	d, err := e.store.GetRun(e.ctx, runID)
	require.NoError(e.t, err)
	return d
}

func (e *env) sweepAt(now time.Time, term reaper.Term) reaper.Report {
	e.clock.Set(now)
	rep, err := e.reapers.Sweep(e.ctx, term)
	require.NoError(e.t, err)
	require.Empty(e.t, rep.Errors)
	kept := rep.Candidates[:0]
	for _, c := range rep.Candidates {
		if e.focus[c.Reaper] {
			kept = append(kept, c)
		}
	}
	rep.Candidates = kept
	return rep
}

func (e *env) decisions(label string) float64 {
	return testutil.ToFloat64(e.metrics.Decisions.WithLabelValues(label))
}

func (e *env) eventKinds(runID int64) []string {
	evs, err := e.store.RunEvents(e.ctx, runID, 0)
	require.NoError(e.t, err)
	kinds := make([]string, len(evs))
	for i, ev := range evs {
		kinds[i] = string(ev.Kind)
	}
	return kinds
}

// only pushes the other reapers' thresholds out of reach, so a test that
// steps the clock far ahead sees just the reaper it is about.
func (e *env) only(name state.Reaper) {
	e.focus = map[state.Reaper]bool{name: true}
	far := 24 * time.Hour
	switch name {
	case state.ReaperAgentLost:
		e.th.DispatchLost, e.th.Orphan = far, far
	case state.ReaperDispatchLost:
		e.th.Orphan = far
	case state.ReaperOrphan:
		e.th.DispatchLost = far
	case state.ReaperRunTimeout:
		e.th.AgentLost, e.th.DispatchLost, e.th.Orphan = far, far, far
	}
}

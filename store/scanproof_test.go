package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// Scan proof of the incremental leader loops (adr/0011): an idle
// scheduler tick, every reaper's pass with nothing to reap, and retention
// with nothing to prune read no task_instances row however much history
// and live work there is; the same work given a fixed amount to do (one
// stale candidate per reaper, the tick over the runs they dirtied, ten
// prunable runs and agents) reads the TIs of that work only.
//
// Method. The same workloads run against two databases seeded alike but
// five times apart in size (20k vs 100k terminal TIs, 200 vs 1,000
// running runs × 50 TIs). Each piece of work runs on a Store of its own
// which is then closed; once its backends have left pg_stat_activity,
// their counters are in pg_stat_user_tables/_indexes (a backend flushes
// its statistics at exit, before it releases its pg_stat_activity slot),
// and the delta around the work is exact: nothing else uses the database,
// autovacuum is off on the seeded tables, ANALYZE sampled every row (so
// the plans are a function of the data, not of a random sample) and the
// observer only reads statistics views (see observer in
// scale_seed_test.go). No clock or timing is asserted; the reapers read a
// stepped clock set to the seed's database time, so nothing is stale
// whatever the wall time.
//
// From the deltas of task_instances it asserts: no sequential scan (the
// plan-shape check, made on the statements the store really sends with
// their real arguments, which an EXPLAIN of a copied statement could not
// promise); the heap tuples read (seq_tup_read + idx_tup_fetch) and the
// index entries read (idx_tup_read over its indexes, which covers
// index-only scans) within the work's own bound at both sizes and not
// growing from one to the other; and that the index the design names for
// the work is the one scanned. EXPLAIN is used where the counters cannot
// reach: the generic plans PostgreSQL may switch the foreign-key actions
// of retention to (checkRetentionFKPlans).

// scanSizes are the two seeds compared.
var scanSizes = []scale{
	{HistoryRuns: 400, LiveRuns: 200, Agents: 20},   // 20k terminal TIs, 10k live TIs
	{HistoryRuns: 2000, LiveRuns: 1000, Agents: 20}, // 100k terminal TIs, 50k live TIs
}

// idleReps is how often idle work runs on one Store per measurement:
// beyond the five custom plans after which PostgreSQL may settle a
// prepared statement (pgx prepares every statement) on its generic plan,
// so both plans are measured.
const idleReps = 8

// probeSlack is the task_instances entries one execution may read while
// it is planned, whatever the data size: when a comparison value falls
// outside a column's histogram, the planner reads the actual extremes of
// an index (get_actual_variable_range), and that is counted like any
// index read. A join that gives up early (a hash join whose inner side is
// empty still reads one outer row) is of the same order.
const probeSlack = 5

// scanCase is one piece of leader work and what it may read from
// task_instances.
type scanCase struct {
	name string
	// setup, when set, runs first on a connection of its own ($1 is the
	// seed's clock): it plants the fixed work the case must find.
	setup string
	// thenSetup, when set, runs after setup as a statement of its own, so
	// it sees what setup's triggers did.
	thenSetup string
	reps      int // runs of work per measurement; default 1
	work      func(now time.Time) storeWork
	// maxRows bounds, per run, the heap tuples and the index entries read
	// from task_instances, beyond probeSlack, at either size.
	maxRows int64
	// uses are task_instances indexes the work must scan: the access path
	// the design gives it.
	uses []string
}

// liveRun is the id of the k-th live run (0-based), for setups.
func liveRun(k int) string {
	return fmt.Sprintf("(SELECT id FROM runs WHERE state = 'running' ORDER BY id OFFSET %d LIMIT 1)", k)
}

// reaperWork is one Pass of the named reaper, which must find and apply
// exactly want candidates.
func reaperWork(name state.Reaper, want int) func(now time.Time) storeWork {
	return func(now time.Time) storeWork {
		return func(ctx context.Context, st *store.Store) error {
			r, err := newReapers(st, now, 0)
			if err != nil {
				return err
			}
			rep, err := r.Pass(ctx, name, oldTerm(now))
			if err != nil {
				return err
			}
			if len(rep.Candidates) != want || len(rep.Errors) != 0 || len(rep.Grace) != 0 {
				return fmt.Errorf("pass of %s: want %d candidate(s), got %+v", name, want, rep)
			}
			for _, c := range rep.Candidates {
				if !c.Applied {
					return fmt.Errorf("pass of %s: candidate not applied: %+v", name, c)
				}
			}
			return nil
		}
	}
}

func pruneWork(agents bool, olderThan time.Duration, want int) func(time.Time) storeWork {
	return func(time.Time) storeWork {
		return func(ctx context.Context, st *store.Store) error {
			var n int
			var err error
			if agents {
				n, err = st.PruneAgents(ctx, scaleEpoch, olderThan, 500)
			} else {
				n, err = st.PruneRuns(ctx, scaleEpoch, olderThan, 500)
			}
			if err == nil && n != want {
				err = fmt.Errorf("pruned %d, want %d", n, want)
			}
			return err
		}
	}
}

// scanCases are measured in order on each seed: first everything idle,
// then fixed work planted by setups (the same at both sizes), which
// changes the database for the cases after it.
func scanCases() []scanCase {
	cases := []scanCase{{
		name: "ScheduleDirty/idle",
		reps: idleReps,
		work: func(time.Time) storeWork {
			return func(ctx context.Context, st *store.Store) error {
				res, err := st.ScheduleDirty(ctx, scaleEpoch, 256)
				if err == nil && (res.Runs != 0 || res.Moved() != 0) {
					err = fmt.Errorf("idle tick did something: %+v", res)
				}
				return err
			}
		},
		// The due end of ti_retry_idx: the scan stops at the first retry
		// not yet due.
		uses: []string{"ti_retry_idx"},
	}}
	// With nothing to reap, each reaper reads the due end of the index on
	// its signal; the ones on runs and agents read no TI at all.
	idleUses := map[state.Reaper][]string{
		state.ReaperAgentInactive:    nil, // agents_active_hb_idx
		state.ReaperAgentLost:        {"ti_running_unowned_idx"},
		state.ReaperExecutionTimeout: {"ti_timeout_idx"},
		state.ReaperRunTimeout:       nil, // runs_deadline_idx
		state.ReaperDispatchLost:     {"ti_queued_idx"},
		state.ReaperOrphan:           nil, // runs_idle_idx
	}
	for _, name := range state.Reapers() {
		uses, ok := idleUses[name]
		if !ok {
			panic("scan proof: no expectation for reaper " + string(name) + "; add one")
		}
		cases = append(cases, scanCase{name: "reaper/" + string(name) + "/idle", reps: idleReps,
			work: reaperWork(name, 0), uses: uses})
	}
	// Nothing is older than 90 days; the prunable rows are 60 days old.
	cases = append(cases,
		scanCase{name: "PruneRuns/nothing", reps: idleReps, work: pruneWork(false, 90*24*time.Hour, 0)},
		scanCase{name: "PruneAgents/nothing", reps: idleReps, work: pruneWork(true, 90*24*time.Hour, 0)},
	)

	// Fixed work: one candidate per reaper, planted in the first live runs.
	// Each pass may read the TIs of its candidates a few times (list,
	// guarded write, event), never the others.
	return append(cases,
		scanCase{
			name: "reaper/agent_lost/1silent_agent",
			// An agent silent for 10 minutes owning the 4 running TIs of the
			// first live run: 3 started (fail), 1 not (requeue).
			setup: `WITH a AS (
			          INSERT INTO agents (name, capacity, registered_at, last_heartbeat_at, oldest_heartbeat_at)
			          VALUES ('silent', 4, $1::timestamptz - interval '1 day', $1::timestamptz - interval '10 minutes',
			                  $1::timestamptz - interval '10 minutes') RETURNING id)
			        UPDATE task_instances SET agent_id = (SELECT id FROM a), last_heartbeat_at = $1::timestamptz - interval '10 minutes'
			         WHERE state = 'running' AND run_id = ` + liveRun(0),
			work: reaperWork(state.ReaperAgentLost, liveRunning), maxRows: 4 * liveRunning,
			uses: []string{"ti_agent_idx"},
		},
		scanCase{
			name: "reaper/agent_inactive/1silent_agent", // the same agent, now with nothing running
			work: reaperWork(state.ReaperAgentInactive, 1), maxRows: 0,
		},
		scanCase{
			name: "reaper/dispatch_lost/1stale_ti",
			// A TI queued 10 minutes ago for a tag no agent offers.
			setup: `UPDATE task_instances SET queued_at = $1::timestamptz - interval '10 minutes', required_tags = '{gpu}'
			         WHERE state = 'queued' AND ordinal = 34 AND run_id = ` + liveRun(1),
			// The pass walks the stale end of ti_queued_idx twice (the
			// uncoverable list, then the backlog gauge): each walk reads the
			// stale entry, the first fresh one that ends it and the row.
			work: reaperWork(state.ReaperDispatchLost, 1), maxRows: 8,
			uses: []string{"ti_queued_idx"},
		},
		scanCase{
			name: "reaper/execution_timeout/1overdue_ti",
			setup: `UPDATE task_instances SET started_at = $1::timestamptz - interval '70 minutes',
			               timeout_at = $1::timestamptz - interval '10 minutes'
			         WHERE ordinal = 30 AND run_id = ` + liveRun(2),
			work: reaperWork(state.ReaperExecutionTimeout, 1), maxRows: 4,
			uses: []string{"ti_timeout_idx"},
		},
		scanCase{
			name: "reaper/run_timeout/1due_run", // cancels the run's TIs
			setup: `UPDATE runs SET timeout = interval '10 minutes', deadline_at = $1::timestamptz - interval '1 minute'
			         WHERE id = ` + liveRun(3),
			work: reaperWork(state.ReaperRunTimeout, 1), maxRows: 4 * tisPerRun,
		},
		scanCase{
			name: "reaper/orphan/1idle_run",
			// A run left with only success and 'none' TIs, unchanged and idle
			// for 10 minutes: its 13 'none' TIs fail as orphaned.
			setup: `WITH t AS (
			          UPDATE task_instances SET state = CASE WHEN state IN ('running', 'queued', 'up_for_retry') THEN 'success' ELSE state END,
			                 next_retry_at = NULL, updated_at = $1::timestamptz - interval '10 minutes'
			           WHERE run_id = ` + liveRun(4) + ` RETURNING run_id)
			        UPDATE runs SET idle_since = $1::timestamptz - interval '10 minutes', updated_at = $1::timestamptz - interval '10 minutes'
			         WHERE id = (SELECT DISTINCT run_id FROM t)`,
			work: reaperWork(state.ReaperOrphan, 1), maxRows: 4 * tisPerRun,
		},
		scanCase{
			name: "reaper/orphan/1limbo_run",
			// A run a write outside Vigil (this setup's own connection, not
			// named vigil*) left with only success and 'none' TIs: the
			// write's trigger (migrations 017, 019) marks it idle, and
			// thenSetup moves that mark, and only that mark, onto the seed's
			// clock, 10 minutes back. Without the trigger's mark the pass
			// finds nothing and the case fails. The pass reads the TIs of
			// that run only, through runs_idle_idx, like a scheduler-marked
			// run.
			setup: `UPDATE task_instances SET state = CASE WHEN state IN ('running', 'queued', 'up_for_retry') THEN 'success' ELSE state END,
			               next_retry_at = NULL, updated_at = $1::timestamptz - interval '10 minutes'
			         WHERE run_id = ` + liveRun(5),
			thenSetup: `UPDATE runs SET idle_since = $1::timestamptz - interval '10 minutes', updated_at = $1::timestamptz - interval '10 minutes'
			             WHERE id = ` + liveRun(5) + ` AND idle_since IS NOT NULL`,
			work: reaperWork(state.ReaperOrphan, 1), maxRows: 4 * tisPerRun,
		},
		scanCase{
			// The (at most 6) runs the reaps above marked dirty: the tick reads
			// their TIs, nothing else. Each TI of a dirty run is read about a
			// dozen times (each step, the upstream checks of its 'none' TIs,
			// the events), so the bound is per run, not per row changed.
			name: "ScheduleDirty/reaped_runs",
			work: func(time.Time) storeWork {
				return func(ctx context.Context, st *store.Store) error {
					res, err := st.ScheduleDirty(ctx, scaleEpoch, 256)
					if err == nil && res.Runs == 0 {
						err = fmt.Errorf("no dirty run after the reaps: %+v", res)
					}
					return err
				}
			},
			maxRows: 6 * tisPerRun * 16,
		},
		// The cascade deletes exactly the TIs of the pruned runs, found
		// through the (run_id, task_id) key.
		scanCase{name: "PruneRuns/10runs", work: pruneWork(false, 30*24*time.Hour, prunableRuns),
			maxRows: prunableRuns * tisPerRun, uses: []string{"task_instances_run_id_task_id_key"}},
		// The unlink updates exactly the TIs that named the pruned agents,
		// found through ti_agent_idx.
		scanCase{name: "PruneAgents/10agents", work: pruneWork(true, 30*24*time.Hour, prunableAgents),
			maxRows: prunableAgents * tisPerPrunableAgent, uses: []string{"ti_agent_idx"}},
	)
}

func TestScanProofLeaderWork(t *testing.T) {
	cases := scanCases()
	// got[size][case] is what the case did to task_instances at that size.
	got := make([]map[string]tableStats, len(scanSizes))
	var mu sync.Mutex
	t.Run("seed", func(t *testing.T) {
		for i, sc := range scanSizes {
			t.Run(sc.String(), func(t *testing.T) {
				t.Parallel()
				sd := seedScale(t, sc, true)
				res := map[string]tableStats{}
				for _, c := range cases {
					if c.setup != "" {
						conn, err := pgx.Connect(context.Background(), sd.url)
						require.NoError(t, err)
						_, err = conn.Exec(context.Background(), c.setup, sd.now)
						if err == nil && c.thenSetup != "" {
							_, err = conn.Exec(context.Background(), c.thenSetup, sd.now)
						}
						conn.Close(context.Background())
						require.NoError(t, err, c.name)
					}
					work := c.work(sd.now)
					d := sd.obs.measure(t, sd.url, func(ctx context.Context, st *store.Store) error {
						for r := 0; r < max(c.reps, 1); r++ {
							if err := work(ctx, st); err != nil {
								return fmt.Errorf("%s: %w", c.name, err)
							}
						}
						return nil
					})
					res[c.name] = d["task_instances"]
					t.Logf("%-38s task_instances: %s", c.name, d["task_instances"])
				}
				if i == len(scanSizes)-1 {
					checkRetentionFKPlans(t, sd)
				}
				mu.Lock()
				got[i] = res
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}
	small, large := got[0], got[len(got)-1]
	for _, c := range cases {
		reps := int64(max(c.reps, 1))
		// Growth slack: the planner's probes, and for work that changes rows
		// a twentieth of its bound, for the dead versions and index entries
		// earlier work left behind, which differ a little between two seeds.
		bound, slack := reps*(c.maxRows+probeSlack), reps*(probeSlack+c.maxRows/20)
		s, l := small[c.name], large[c.name]
		var bad []string
		for k, d := range []tableStats{s, l} {
			size := scanSizes[0].String()
			if k == 1 {
				size = scanSizes[len(scanSizes)-1].String()
			}
			if d.SeqScan != 0 {
				bad = append(bad, fmt.Sprintf("%s: %d sequential scan(s) of task_instances", size, d.SeqScan))
			}
			if d.HeapRows() > bound || d.IndexRows() > bound {
				bad = append(bad, fmt.Sprintf("%s: read %d heap rows and %d index entries of task_instances in %d run(s), bound %d",
					size, d.HeapRows(), d.IndexRows(), reps, bound))
			}
			for _, idx := range c.uses {
				if d.IndexScans[idx] == 0 {
					bad = append(bad, fmt.Sprintf("%s: never scans %s (scans %v)", size, idx, d.UsedIndexes()))
				}
			}
		}
		if l.HeapRows() > s.HeapRows()+slack || l.IndexRows() > s.IndexRows()+slack {
			bad = append(bad, fmt.Sprintf("reads grow with the data: %d → %d heap rows, %d → %d index entries",
				s.HeapRows(), l.HeapRows(), s.IndexRows(), l.IndexRows()))
		}
		if len(bad) > 0 {
			t.Errorf("%s:\n\t%s", c.name, strings.Join(bad, "\n\t"))
		}
	}
}

// checkRetentionFKPlans checks the plans of the statements PostgreSQL
// itself runs for retention's foreign-key actions (ri_triggers.c: ON
// DELETE CASCADE from runs and from task_instances) and of PruneAgents'
// own statement, which unlinks the pruned agents' TIs in place of the ON
// DELETE SET NULL that agent_id no longer has (adr/0027). Each is prepared
// once per session and, after five executions, may switch to a generic
// plan that ignores the parameters' values; with the history concentrated
// on a few long-lived agents a generic plan estimates many rows per
// agent_id, so this is where a sequential scan of task_instances could
// sneak in. The counters cannot show a plan that was not chosen, so this
// EXPLAINs the forced generic plan of each against the seed's statistics
// and refuses a sequential scan of a table that grows with history.
func checkRetentionFKPlans(t *testing.T, sd seeded) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, sd.url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)
	for name, st := range map[string]struct{ sql, args string }{
		// The statement texts ri_triggers.c builds (PostgreSQL 15).
		"cascade from runs":                        {`DELETE FROM ONLY "public"."task_instances" WHERE $1 OPERATOR(pg_catalog.=) "run_id"`, "(1)"},
		"cascade from task_instances to task_logs": {`DELETE FROM ONLY "public"."task_logs" WHERE $1 OPERATOR(pg_catalog.=) "ti_id"`, "(1)"},
		"prune agents, unlinking their TIs":        {store.PruneAgentsSQLForTest, "(1, 500)"},
	} {
		_, err := conn.Prepare(ctx, name, st.sql)
		require.NoError(t, err, name)
		var plan []byte
		require.NoError(t, conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE "`+name+`"`+st.args).Scan(&plan), name)
		var doc []struct{ Plan planNode }
		require.NoError(t, json.Unmarshal(plan, &doc))
		scans := doc[0].Plan.scans()
		t.Logf("%s (generic plan): %v", name, scans)
		require.NotEmpty(t, scans, name)
		for _, s := range scans {
			// History's tables; agents holds the fleet, which a plan may read whole.
			for _, table := range []string{"task_instances", "task_logs"} {
				assert.NotContains(t, s, "Seq Scan "+table, "%s: generic plan scans %s sequentially: %s", name, table, plan)
			}
		}
	}
}

// planNode is a node of EXPLAIN (FORMAT JSON); the Actual and Removed
// counts come with ANALYZE only.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	Rows         float64    `json:"Actual Rows"`
	Loops        float64    `json:"Actual Loops"`
	Removed      float64    `json:"Rows Removed by Filter"`
	JoinRemoved  float64    `json:"Rows Removed by Join Filter"`
	Plans        []planNode `json:"Plans"`
}

// scans lists the relations and indexes the plan reads, each as "node
// type, relation, index".
func (n planNode) scans() []string {
	var out []string
	n.walk(func(p planNode) {
		if p.RelationName != "" || p.IndexName != "" {
			out = append(out, strings.TrimSpace(p.NodeType+" "+p.RelationName+" "+p.IndexName))
		}
	})
	return out
}

func (n planNode) walk(fn func(planNode)) {
	fn(n)
	for _, c := range n.Plans {
		c.walk(fn)
	}
}

// TestHOTHeartbeats proves that heartbeats of running TIs are heap-only
// (HOT) updates: after the claim and the first started heartbeat (which
// set indexed columns: state, agent_id, timeout_at), a heartbeat rewrites
// only unindexed columns, so PostgreSQL can update the row in place on its
// page without touching any task_instances index.
//
// Method: as in the scan proof, each batch of heartbeats runs on a Store
// of its own that is then closed; once its backends have exited (flushing
// their statistics) the n_tup_upd and n_tup_hot_upd deltas of
// task_instances are exact. Ten agents of the default capacity (4) each
// heartbeat their four running TIs, in turn.
//
// HOT also needs room on the row's page for the new version. fillfactor
// 80 keeps a fifth of each page free from inserts, and each heartbeat's
// dead version is pruned when the next one visits the page, as long as no
// snapshot still needs it: nothing else runs in this database, and
// autovacuum is off on its tables so that no ANALYZE holds a snapshot
// meanwhile. But the claim and the started heartbeat are not HOT, and
// PostgreSQL puts the new version of a non-HOT update on the same page
// whenever it fits, fillfactor notwithstanding; so a page can come out of
// the claims packed, and the first heartbeat round may have to move a row
// or two to another page (observed: 1 of the first 1,000 updates).
//
// Each batch asserts ≥ 99%, the second too. A prune needs a cleanup lock
// on the page and is skipped, not waited for, while any other process
// pins it; the likely pins in the shared test cluster, where nothing else
// uses this database, are the checkpointer's and the background writer's
// as they write our dirty pages out, more often the busier the cluster
// (not proven: PostgreSQL 15 counts no skipped prunes). A full store run beside the rest of the suite (load
// average 20) saw 996 of the second 1,000; alone it is 1,000 of 1,000.
// What the test guards is unchanged: a heartbeat that set an indexed
// column would make every one of its updates non-HOT (ratio near 0).
func TestHOTHeartbeats(t *testing.T) {
	const (
		agents   = 10
		capacity = 4 // the agent's default capacity
		beats    = 250
	)
	ctx := context.Background()
	url := storetest.DB(t)
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	var sb strings.Builder
	sb.WriteString("dag_id: hot\nmax_active_tasks: 1000\ntasks:\n")
	for i := 0; i < agents*capacity; i++ {
		fmt.Fprintf(&sb, "  - id: t%02d\n    command: [\"sleep\", \"60\"]\n    execution_timeout: 1h\n    env: {STEP: \"%d\"}\n", i, i)
	}
	spec, err := dag.Parse([]byte(sb.String()))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	require.NoError(t, st.AcquireFence(ctx, scaleEpoch, "hot"))
	for i := 0; i < 2; i++ { // the second run stays queued beside the first
		_, err = st.TriggerRun(ctx, "hot")
		require.NoError(t, err)
	}
	for {
		res, err := st.ScheduleDirty(ctx, scaleEpoch, 100)
		require.NoError(t, err)
		if res.Runs == 0 {
			break
		}
	}
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	// Autovacuum off on every table, not only task_instances: an ANALYZE
	// of any table of this database (agents and events change with every
	// heartbeat) holds a snapshot that keeps the heartbeats' dead versions
	// from being pruned; a full store run under load saw 986 of 1,000.
	_, err = conn.Exec(ctx, `DO $$
		DECLARE t regclass;
		BEGIN
		  FOR t IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		            WHERE c.relkind = 'r' AND n.nspname = current_schema() LOOP
		    EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', t);
		  END LOOP;
		END $$`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	ids := make([]int64, agents)
	entries := make([][]store.HeartbeatEntry, agents)
	for a := range ids {
		ids[a] = storetest.Agent(t, st, store.Registration{Name: fmt.Sprintf("hot-%d", a), Capacity: capacity})
		tasks, err := st.Claim(ctx, ids[a], capacity)
		require.NoError(t, err)
		require.Len(t, tasks, capacity)
		for _, task := range tasks {
			entries[a] = append(entries[a], store.HeartbeatEntry{Attempt: task.Attempt, Started: true})
		}
		// The first started heartbeat sets started_at and timeout_at.
		stops, _, err := st.Heartbeat(ctx, ids[a], entries[a])
		require.NoError(t, err)
		require.Empty(t, stops)
	}
	// Other runs' TIs, so that the table is not the few pages whose
	// sequential scan the planner rightly prefers to any index; the
	// heartbeats must still find their rows by key.
	spec, err = dag.Parse([]byte(storetest.WideDAGYAML("hot-pad", 50)))
	require.NoError(t, err)
	_, err = st.ApplyDAG(ctx, spec)
	require.NoError(t, err)
	for i := 0; i < 100; i++ {
		_, err = st.TriggerRun(ctx, "hot-pad")
		require.NoError(t, err)
	}
	st.Close()
	conn, err = pgx.Connect(ctx, url)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `ANALYZE task_instances`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	obs := newObserver(t, url)
	batch := func(ctx context.Context, st *store.Store) error {
		for i := 0; i < beats; i++ {
			a := i % agents
			stops, _, err := st.Heartbeat(ctx, ids[a], entries[a])
			if err != nil {
				return err
			}
			if len(stops) != 0 {
				return fmt.Errorf("heartbeat %d: stop orders %v", i, stops)
			}
		}
		return nil
	}
	for _, b := range []struct {
		name   string
		minHOT float64
	}{{"first batch after the start", 0.99}, {"second batch", 0.99}} {
		d := obs.measure(t, url, batch)
		ti, ag := d["task_instances"], d["agents"]
		ratio := float64(ti.HotUpd) / float64(max(ti.Upd, 1))
		t.Logf("%s: %d heartbeats of %d running TIs each: task_instances n_tup_upd=%d n_tup_hot_upd=%d (HOT %.1f%%); agents n_tup_upd=%d n_tup_hot_upd=%d",
			b.name, beats, capacity, ti.Upd, ti.HotUpd, 100*ratio, ag.Upd, ag.HotUpd)
		require.EqualValues(t, beats*capacity, ti.Upd, "%s: every heartbeat updates each of its TIs once", b.name)
		assert.GreaterOrEqual(t, ratio, b.minHOT, "%s: HOT ratio of heartbeat updates of task_instances", b.name)
		assert.Zero(t, ti.SeqScan, "%s: heartbeats scanned task_instances sequentially", b.name)
	}
}

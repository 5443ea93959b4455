package store_test

// Shared by the scan-proof tests (scanproof_test.go) and the scale
// benchmarks (bench_scale_test.go): a database seeded with terminal
// history and live work in a few INSERT ... SELECT generate_series
// statements, and a way to read, deterministically, what a piece of store
// work did to each table (pg_stat_user_tables / pg_stat_user_indexes).

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/reaper/reapertest"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// scaleEpoch is the fencing epoch every seeded database is acquired with.
const scaleEpoch = 1

// tisPerRun is the width of every seeded run (the DAG "scan" has this many
// tasks, no dependencies).
const tisPerRun = 50

// History: tisPerRun success TIs per run, each with one event, every
// fifth with one log line. Per live run, by ordinal: 0..29 success,
// 30..33 running (30..32 started, 30 with an execution_timeout, 33
// claimed but not started), 34..35 queued, 36 up_for_retry (due in an
// hour), 37..49 none. So a live run has 4 running, 2 queued and 1
// retrying TI, like a wide DAG half done.
const liveRunning = 4

// Fixed-size prunable work, identical at every scale: prunableRuns
// terminal runs (tisPerRun TIs each) that ended prunableAge ago, and
// prunableAgents inactive agents silent for prunableAge, each named by
// tisPerPrunableAgent historical TIs. The rest of the history is younger
// than prunableAge and named by live agents.
const (
	prunableRuns        = 10
	prunableAgents      = 10
	tisPerPrunableAgent = 20
	prunableAge         = 60 * 24 * time.Hour
	goneAgents          = 20 // inactive for an hour: not prunable at any test threshold
)

// scale describes a seeded database.
type scale struct {
	HistoryRuns int // terminal (success) runs of tisPerRun TIs, one event per TI
	LiveRuns    int // running runs of tisPerRun TIs (see liveRunning)
	Agents      int // live agents, heartbeating at the seed's clock, owning the history and live TIs
}

func (s scale) String() string {
	return fmt.Sprintf("hist=%dTIs/live=%dx%d", s.HistoryRuns*tisPerRun, s.LiveRuns, tisPerRun)
}

// seeded is a database seeded by seedScale.
type seeded struct {
	url string
	// now is the database clock at seeding. Every stamp is at or before it
	// (due times after it), so a reaper whose stepped clock reads now finds
	// nothing stale however long the test takes.
	now time.Time
	// obs is the database's only other connection: see observer.
	obs *observer
}

// scanDAG is the DAG every seeded run belongs to.
func scanDAG() string {
	var sb strings.Builder
	sb.WriteString("dag_id: scan\nmax_active_tasks: 1000\ntasks:\n")
	for i := 0; i < tisPerRun; i++ {
		fmt.Fprintf(&sb, "  - id: t%02d\n    command: [\"sh\", \"-c\", \"exit 0\"]\n", i)
	}
	return sb.String()
}

// seedScale creates a fresh database (storetest.DB) holding sc, acquires
// the fence at scaleEpoch, runs VACUUM ANALYZE so that plans and the
// visibility map are those of a settled production table, and returns
// once every connection it used has gone (so none of the seeding is still
// waiting to be flushed into the statistics a test reads afterwards).
// With deterministic, the statistics are a function of the data alone:
// ANALYZE samples up to 300 × default_statistics_target rows at random,
// so with the default target (100) two seeds of the same data can get
// different histograms and, where a plan is sensitive to them, different
// plans; deterministic sets the target to 1000, which samples every row of
// tables up to 300k rows, and disables autovacuum on the seeded tables so
// that no autoanalyze changes a plan between two measurements. Benchmarks
// leave both as in production.
func seedScale(tb testing.TB, sc scale, deterministic bool) seeded {
	tb.Helper()
	ctx := context.Background()
	url := storetest.DB(tb)
	st, err := store.Open(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	spec, err := dag.Parse([]byte(scanDAG()))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := st.ApplyDAG(ctx, spec); err != nil {
		tb.Fatal(err)
	}
	if err := st.AcquireFence(ctx, scaleEpoch, "scale"); err != nil {
		tb.Fatal(err)
	}
	st.Close()

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	var now time.Time
	if err := conn.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		tb.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		tb.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			tb.Fatalf("seed: %v\n%s", err, sql)
		}
	}
	// Live agents: heartbeating at now; oldest_heartbeat_at is the stamp of
	// their oldest running TI (now − 5 s below), as claims and heartbeats
	// keep it.
	exec(`INSERT INTO agents (name, tags, capacity, state, registered_at, last_heartbeat_at, oldest_heartbeat_at)
	      SELECT 'live-' || g, '{linux}', 100000, 'active', $1::timestamptz - interval '1 day', $1, $1::timestamptz - interval '5 seconds'
	        FROM generate_series(1, $2) g`, now, sc.Agents)
	exec(`INSERT INTO agents (name, capacity, state, registered_at, last_heartbeat_at)
	      SELECT 'gone-' || g, 4, 'inactive', $1::timestamptz - interval '2 days', $1::timestamptz - interval '1 hour'
	        FROM generate_series(1, $2) g`, now, goneAgents)
	exec(`INSERT INTO agents (name, capacity, state, registered_at, last_heartbeat_at)
	      SELECT 'old-' || g, 4, 'inactive', $1::timestamptz - $3 * interval '1 microsecond' - interval '1 day',
	             $1::timestamptz - $3 * interval '1 microsecond'
	        FROM generate_series(1, $2) g`, now, prunableAgents, prunableAge.Microseconds())

	// History: terminal runs, oldest first (ids follow end_date, as in
	// production), the prunable ones ending prunableAge ago and the rest
	// within the last days. TIs of a run are inserted together, as
	// TriggerRun does, so they share heap pages.
	exec(`
		WITH ag AS (SELECT array_agg(id ORDER BY id) AS ids FROM agents WHERE name LIKE 'live-%'),
		r AS (
		  INSERT INTO runs (dag_id, state, message, max_active_tasks, queued_at, start_date, end_date, updated_at)
		  SELECT 'scan', 'success', 'all tasks succeeded or were skipped', 1000, e - interval '10 minutes',
		         e - interval '9 minutes', e, e
		    FROM (SELECT CASE WHEN g <= $3::int THEN $1::timestamptz - $4::bigint * interval '1 microsecond' + g * interval '1 second'
		                      ELSE $1::timestamptz - interval '1 day' - ($2::int + $3::int - g) * interval '1 second' END AS e
		            FROM generate_series(1, $2::int + $3::int) g ORDER BY 1) x
		  RETURNING id, start_date, end_date)
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, state, command, try_number, attempt_id,
		       agent_id, queued_at, claimed_at, started_at, last_heartbeat_at, end_date, exit_code, updated_at)
		SELECT r.id, 'scan', 't' || lpad(o::text, 2, '0'), o, 'success', '{sh,-c,"exit 0"}', 1, gen_random_uuid(),
		       ag.ids[1 + (r.id * 50 + o) % cardinality(ag.ids)], r.start_date, r.start_date, r.start_date,
		       r.end_date, r.end_date, 0, r.end_date
		  FROM r, ag, generate_series(0, 49) o
		 ORDER BY r.id, o`, now, sc.HistoryRuns, prunableRuns, prunableAge.Microseconds())
	// The prunable agents name some of the recent history (never the
	// prunable runs, so the two fixed workloads stay independent).
	exec(`
		WITH old AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM agents WHERE name LIKE 'old-%'),
		pick AS (
		  SELECT t.id, row_number() OVER (ORDER BY t.id) - 1 AS k FROM task_instances t
		   WHERE t.run_id > (SELECT max(id) FROM (SELECT id FROM runs ORDER BY id LIMIT $1) p)
		   ORDER BY t.id LIMIT $2)
		UPDATE task_instances t SET agent_id = old.id
		  FROM pick JOIN old ON old.k = pick.k % $3
		 WHERE t.id = pick.id`, prunableRuns, prunableAgents*tisPerPrunableAgent, prunableAgents)
	exec(`INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message, created_at)
	      SELECT run_id, id, task_id, 1, attempt_id, agent_id, 'ti_success', 'exit 0', end_date FROM task_instances ORDER BY id`)
	exec(`INSERT INTO events (run_id, kind, message, created_at)
	      SELECT id, 'run_success', message, end_date FROM runs ORDER BY id`)
	// Logs of every fifth historical TI: enough for the planner to see a
	// real table behind retention's cascade from task_instances.
	exec(`INSERT INTO task_logs (ti_id, try_number, attempt_id, seq, stream, ts, line, received_at)
	      SELECT id, 1, attempt_id, 1, 'stdout', end_date, 'done', end_date FROM task_instances
	       WHERE ordinal % 5 = 0 ORDER BY id`)

	// Live work. Every tenth run has a run timeout (due in over an hour),
	// every fiftieth was marked idle a minute ago (short of the orphan
	// threshold), so each reaper's index holds entries that are not due.
	exec(`
		WITH ag AS (SELECT array_agg(id ORDER BY id) AS ids FROM agents WHERE name LIKE 'live-%'),
		r AS (
		  INSERT INTO runs (dag_id, state, max_active_tasks, queued_at, start_date, updated_at, timeout, deadline_at, idle_since)
		  SELECT 'scan', 'running', 1000, $1::timestamptz - interval '21 minutes', $1::timestamptz - interval '20 minutes',
		         $1::timestamptz - interval '5 seconds',
		         CASE WHEN g % 10 = 0 THEN interval '2 hours' END,
		         CASE WHEN g % 10 = 0 THEN $1::timestamptz - interval '20 minutes' + interval '2 hours' END,
		         CASE WHEN g % 50 = 0 THEN $1::timestamptz - interval '1 minute' END
		    FROM generate_series(1, $2) g
		  RETURNING id),
		ti AS (
		  SELECT r.id AS run_id, o,
		         CASE WHEN o < 30 THEN 'success' WHEN o < 34 THEN 'running' WHEN o < 36 THEN 'queued'
		              WHEN o = 36 THEN 'up_for_retry' ELSE 'none' END AS state,
		         ag.ids[1 + (r.id * 4 + o) % cardinality(ag.ids)] AS agent
		    FROM r, ag, generate_series(0, 49) o)
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, state, reason, command, try_number,
		       attempt_id, agent_id, queued_at, claimed_at, started_at, last_heartbeat_at, end_date, exit_code,
		       execution_timeout, timeout_at, next_retry_at, retries, updated_at)
		SELECT run_id, 'scan', 't' || lpad(o::text, 2, '0'), o, state,
		       CASE state WHEN 'up_for_retry' THEN 'exit_code' END,
		       '{sh,-c,"exit 0"}',
		       CASE WHEN state IN ('success', 'running', 'up_for_retry') THEN 1 ELSE 0 END,
		       CASE WHEN state IN ('success', 'running') THEN gen_random_uuid() END,
		       CASE WHEN state IN ('success', 'running') THEN agent END,
		       CASE state WHEN 'success' THEN $1::timestamptz - interval '19 minutes'
		                  WHEN 'running' THEN $1::timestamptz - interval '5 minutes'
		                  WHEN 'queued' THEN $1::timestamptz - interval '30 seconds' END,
		       CASE state WHEN 'success' THEN $1::timestamptz - interval '19 minutes'
		                  WHEN 'running' THEN $1::timestamptz - interval '5 minutes' END,
		       CASE WHEN state = 'success' OR (state = 'running' AND o < 33) THEN $1::timestamptz - interval '5 minutes' END,
		       CASE state WHEN 'success' THEN $1::timestamptz - interval '10 minutes'
		                  WHEN 'running' THEN $1::timestamptz - interval '5 seconds' END,
		       CASE state WHEN 'success' THEN $1::timestamptz - interval '10 minutes'
		                  WHEN 'up_for_retry' THEN $1::timestamptz - interval '1 minute' END,
		       CASE state WHEN 'success' THEN 0 WHEN 'up_for_retry' THEN 1 END,
		       CASE WHEN o = 30 THEN interval '1 hour' END,
		       CASE WHEN o = 30 THEN $1::timestamptz - interval '5 minutes' + interval '1 hour' END,
		       CASE state WHEN 'up_for_retry' THEN $1::timestamptz + interval '1 hour' END,
		       CASE state WHEN 'up_for_retry' THEN 3 ELSE 0 END,
		       $1::timestamptz - interval '5 seconds'
		  FROM ti ORDER BY run_id, o`, now, sc.LiveRuns)
	if deterministic {
		for _, t := range []string{"agents", "runs", "task_instances", "events", "run_dirty", "task_logs"} {
			exec(`ALTER TABLE ` + t + ` SET (autovacuum_enabled = false)`)
		}
		exec(`SET default_statistics_target = 1000`)
		var rows int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM task_instances`).Scan(&rows); err != nil {
			tb.Fatal(err)
		}
		if rows > 300*1000 {
			tb.Fatalf("seed: %d TIs is too many for ANALYZE to sample them all", rows)
		}
	}
	exec(`VACUUM (ANALYZE)`)
	if err := conn.Close(ctx); err != nil {
		tb.Fatal(err)
	}
	sd := seeded{url: url, now: now, obs: newObserver(tb, url)}
	sd.obs.quiesce(tb)
	return sd
}

// The statistics views are fed asynchronously: each backend keeps its
// counters in local memory and flushes them into shared memory at most
// once a second while busy (PostgreSQL 15), and unconditionally when it
// exits, before it leaves pg_stat_activity (the flush is a before_shmem_exit
// hook; the pg_stat_activity slot is released by a later on_shmem_exit
// hook). So the deterministic way to see all of some work's counters is:
// do the work on connections of its own, close them, wait until those
// backends have left pg_stat_activity, then read the views in a fresh
// snapshot (pg_stat_clear_snapshot). The observer itself only reads
// pg_stat_* views, which count nothing against user tables.
type observer struct {
	conn *pgx.Conn
}

func newObserver(tb testing.TB, url string) *observer {
	tb.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	return &observer{conn: conn}
}

// quiesce waits until no client backend other than the observer is
// connected to this database: every counter of earlier work is flushed.
// It waits for a condition, not for a time; the deadline only turns a
// leaked connection into a clear failure.
func (o *observer) quiesce(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The observer may be inside a transaction (a test holding a
		// snapshot), where pg_stat_activity stays as first read unless
		// cleared.
		if _, err := o.conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
			tb.Fatal(err)
		}
		var n int
		err := o.conn.QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			 WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&n)
		if err != nil {
			tb.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			var who []string
			rows, _ := o.conn.Query(ctx, `
				SELECT format('pid %s app %L state %s: %s', pid, application_name, state, query) FROM pg_stat_activity
				 WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
			if rows != nil {
				who, _ = pgx.CollectRows(rows, pgx.RowTo[string])
			}
			tb.Fatalf("%d client connection(s) to the test database never closed: %v", n, who)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tableStats are the cumulative counters of one table (pg_stat_user_tables)
// and of its indexes (pg_stat_user_indexes).
type tableStats struct {
	SeqScan, SeqTupRead, IdxScan, IdxTupFetch int64
	Ins, Upd, Del, HotUpd                     int64
	IndexScans                                map[string]int64 // idx_scan per index
	IndexTupRead                              map[string]int64 // idx_tup_read per index
}

// HeapRows is the number of heap tuples the work read: by sequential
// scans, and fetched through indexes (index and bitmap heap scans).
func (s tableStats) HeapRows() int64 { return s.SeqTupRead + s.IdxTupFetch }

// IndexRows is the number of index entries the work read, over every
// index of the table; it covers index-only scans, which fetch no heap
// tuple.
func (s tableStats) IndexRows() int64 {
	var n int64
	for _, v := range s.IndexTupRead {
		n += v
	}
	return n
}

// UsedIndexes lists the indexes scanned at least once, sorted.
func (s tableStats) UsedIndexes() []string {
	var out []string
	for k, v := range s.IndexScans {
		if v > 0 {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (s tableStats) String() string {
	return fmt.Sprintf("seq_scan=%d seq_tup_read=%d idx_scan=%d idx_tup_fetch=%d idx_tup_read=%d ins=%d upd=%d hot=%d del=%d via=%v",
		s.SeqScan, s.SeqTupRead, s.IdxScan, s.IdxTupFetch, s.IndexRows(), s.Ins, s.Upd, s.HotUpd, s.Del, s.UsedIndexes())
}

func (s tableStats) sub(o tableStats) tableStats {
	d := tableStats{
		SeqScan: s.SeqScan - o.SeqScan, SeqTupRead: s.SeqTupRead - o.SeqTupRead,
		IdxScan: s.IdxScan - o.IdxScan, IdxTupFetch: s.IdxTupFetch - o.IdxTupFetch,
		Ins: s.Ins - o.Ins, Upd: s.Upd - o.Upd, Del: s.Del - o.Del, HotUpd: s.HotUpd - o.HotUpd,
		IndexScans: map[string]int64{}, IndexTupRead: map[string]int64{},
	}
	for k, v := range s.IndexScans {
		d.IndexScans[k] = v - o.IndexScans[k]
	}
	for k, v := range s.IndexTupRead {
		d.IndexTupRead[k] = v - o.IndexTupRead[k]
	}
	return d
}

// snapshot reads the flushed counters of every user table.
func (o *observer) snapshot(tb testing.TB) map[string]tableStats {
	tb.Helper()
	ctx := context.Background()
	if _, err := o.conn.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		tb.Fatal(err)
	}
	out := map[string]tableStats{}
	rows, err := o.conn.Query(ctx, `
		SELECT relname, seq_scan, seq_tup_read, coalesce(idx_scan, 0), coalesce(idx_tup_fetch, 0),
		       n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd
		  FROM pg_stat_user_tables`)
	if err != nil {
		tb.Fatal(err)
	}
	for rows.Next() {
		var name string
		s := tableStats{IndexScans: map[string]int64{}, IndexTupRead: map[string]int64{}}
		if err := rows.Scan(&name, &s.SeqScan, &s.SeqTupRead, &s.IdxScan, &s.IdxTupFetch, &s.Ins, &s.Upd, &s.Del, &s.HotUpd); err != nil {
			tb.Fatal(err)
		}
		out[name] = s
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	rows, err = o.conn.Query(ctx, `SELECT relname, indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes`)
	if err != nil {
		tb.Fatal(err)
	}
	for rows.Next() {
		var rel, idx string
		var scans, read int64
		if err := rows.Scan(&rel, &idx, &scans, &read); err != nil {
			tb.Fatal(err)
		}
		out[rel].IndexScans[idx] = scans
		out[rel].IndexTupRead[idx] = read
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// storeWork is store work measured on a Store of its own.
type storeWork func(ctx context.Context, st *store.Store) error

// measure runs work on a fresh Store, closes it, and returns what it did
// to each table: the delta of the flushed counters around it (see
// observer). Nothing else may use the database meanwhile.
func (o *observer) measure(tb testing.TB, url string, work storeWork) map[string]tableStats {
	tb.Helper()
	ctx := context.Background()
	o.quiesce(tb)
	before := o.snapshot(tb)
	st, err := store.Open(ctx, url)
	if err != nil {
		tb.Fatal(err)
	}
	err = work(ctx, st)
	st.Close()
	if err != nil {
		tb.Fatal(err)
	}
	o.quiesce(tb)
	after := o.snapshot(tb)
	d := map[string]tableStats{}
	for k, v := range after {
		d[k] = v.sub(before[k])
	}
	return d
}

// newReapers builds the reapers on st with a stepped clock reading now
// and the default thresholds and batch.
func newReapers(st *store.Store, now time.Time, batch int) (*reaper.Reapers, error) {
	return reaper.New(reaper.Config{
		Store: st, Metrics: metrics.New(), Clock: reapertest.NewClock(now),
		Thresholds: reaper.DefaultThresholds, Logger: slog.New(slog.DiscardHandler), Batch: batch,
	})
}

// oldTerm is a term that has led, with the database reachable, for a day
// before now: every reaper is past its post-leadership grace.
func oldTerm(now time.Time) reaper.Term {
	return reaper.Term{Epoch: scaleEpoch, GraceStart: now.Add(-24 * time.Hour)}
}

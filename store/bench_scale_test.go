package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// Benchmarks of the leader's loops at the scale the incremental design is
// for: 1M terminal TIs of history and 4,000 running runs × 50 TIs (200k
// live TIs, 16k of them running, 8k queued). They print figures; nothing
// is asserted about time. docs/performance.md records them.
//
// Seeding that database takes tens of seconds, so each benchmark function
// seeds it once (seedScale: INSERT ... SELECT generate_series, then VACUUM
// ANALYZE) and runs its measurements as sub-benchmarks, which the testing
// package repeats for -count and -benchtime without calling the parent
// again. Autovacuum stays on, as in production.

// issueScale is the scale the benchmarks seed.
var issueScale = scale{HistoryRuns: 20000, LiveRuns: 4000, Agents: 40}

// benchOpen opens a Store on url, closed when b ends.
func benchOpen(b *testing.B, url string) *store.Store {
	b.Helper()
	st, err := store.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	return st
}

// benchExec runs one statement on a connection of its own ($1 is usually
// the seed's clock).
func benchExec(b *testing.B, url, sql string, args ...any) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		b.Fatalf("%v\n%s", err, sql)
	}
}

// reportRows runs work reps times on a Store of its own, after the timed
// loop, and reports the task_instances heap rows and index entries it
// read per run (see observer): the figure the scan proof bounds, at this
// scale. With idleReps runs the average covers the first five executions
// of each statement (custom plans) and the generic plan after.
func reportRows(b *testing.B, sd seeded, reps int, work storeWork) {
	b.Helper()
	d := sd.obs.measure(b, sd.url, func(ctx context.Context, st *store.Store) error {
		for i := 0; i < reps; i++ {
			if err := work(ctx, st); err != nil {
				return err
			}
		}
		return nil
	})["task_instances"]
	b.ReportMetric(float64(d.HeapRows())/float64(reps), "ti_rows/op")
	b.ReportMetric(float64(d.IndexRows())/float64(reps), "ti_index_rows/op")
}

// BenchmarkIdleTick is one incremental scheduler pass (ScheduleDirty, a
// fenced transaction) with nothing dirty and no retry due.
func BenchmarkIdleTick(b *testing.B) {
	sd := seedScale(b, issueScale, false)
	tick := func(ctx context.Context, st *store.Store) error {
		res, err := st.ScheduleDirty(ctx, scaleEpoch, 256)
		if err == nil && res.Runs != 0 {
			b.Fatalf("idle tick looked at %d run(s)", res.Runs)
		}
		return err
	}
	b.Run(issueScale.String(), func(b *testing.B) {
		ctx := context.Background()
		st := benchOpen(b, sd.url)
		if err := tick(ctx, st); err != nil { // opens the leader connection
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := tick(ctx, st); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		st.Close()
		reportRows(b, sd, idleReps, tick)
	})
}

// BenchmarkIdleSweep is one Pass of each reaper with nothing to reap:
// a stepped clock at the seed's time, a term long past its grace, the
// default thresholds and batch.
func BenchmarkIdleSweep(b *testing.B) {
	sd := seedScale(b, issueScale, false)
	for _, name := range state.Reapers() {
		pass := func(ctx context.Context, st *store.Store) error {
			r, err := newReapers(st, sd.now, 0)
			if err != nil {
				return err
			}
			rep, err := r.Pass(ctx, name, oldTerm(sd.now))
			if err == nil && (len(rep.Candidates) != 0 || len(rep.Errors) != 0 || len(rep.Grace) != 0) {
				b.Fatalf("idle %s pass: %+v", name, rep)
			}
			return err
		}
		b.Run(string(name), func(b *testing.B) {
			ctx := context.Background()
			st := benchOpen(b, sd.url)
			r, err := newReapers(st, sd.now, 0)
			if err != nil {
				b.Fatal(err)
			}
			term := oldTerm(sd.now)
			if err := pass(ctx, st); err != nil { // opens the connections
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := r.Pass(ctx, name, term); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			st.Close()
			reportRows(b, sd, idleReps, pass)
		})
	}
}

// Stale work for BenchmarkReapStale10k: staleRuns extra running runs of
// tisPerRun TIs, every TI running on one of staleAgents agents that went
// silent 10 minutes before the seed's clock. Even ordinals started (they
// fail with agent_lost, into up_for_retry: retries 1), odd ones never did
// (requeued without spending a try).
const (
	staleRuns   = 200
	staleAgents = 10
	staleTIs    = staleRuns * tisPerRun
)

// BenchmarkReapStale10k is one agent-lost Pass over 10,000 running TIs
// whose agents went silent, beside the seeded scale: with a batch (page)
// covering them all, and with the default batch of 500, where the Pass
// lists and writes page after page until the backlog is gone. Each
// iteration re-plants the stale TIs untimed. ti_rows/op is measured on
// one more Pass after the timed ones.
func BenchmarkReapStale10k(b *testing.B) {
	sd := seedScale(b, issueScale, false)
	benchExec(b, sd.url, `
		WITH a AS (
		  INSERT INTO agents (name, capacity, registered_at, last_heartbeat_at, oldest_heartbeat_at)
		  SELECT 'silent-' || g, 10000, $1::timestamptz - interval '1 day', $1, $1 FROM generate_series(1, $3::int) g),
		r AS (
		  INSERT INTO runs (dag_id, state, max_active_tasks, queued_at, start_date, updated_at)
		  SELECT 'scan', 'running', 1000, $1::timestamptz - interval '30 minutes', $1::timestamptz - interval '30 minutes', $1
		    FROM generate_series(1, $2::int) RETURNING id)
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, state, command, retries, updated_at)
		SELECT r.id, 'scan', 't' || lpad(o::text, 2, '0'), o, 'running', '{sh,-c,"exit 0"}', 1, $1
		  FROM r, generate_series(0, 49) o ORDER BY r.id, o`, sd.now, staleRuns, staleAgents)
	// replant makes the stale TIs running again on a fresh attempt, last
	// heard from 10 minutes before the clock, and drops the scheduler
	// marks the last iteration left (no tick runs here).
	replant := func(b *testing.B) {
		benchExec(b, sd.url, `
			WITH ag AS (
			  UPDATE agents SET state = 'active', last_heartbeat_at = $1::timestamptz - interval '10 minutes',
			         oldest_heartbeat_at = $1::timestamptz - interval '10 minutes'
			   WHERE name LIKE 'silent-%' RETURNING id),
			ids AS (SELECT array_agg(id ORDER BY id) AS ids FROM ag),
			d AS (DELETE FROM run_dirty)
			UPDATE task_instances t
			   SET state = 'running', reason = NULL, message = NULL, end_date = NULL, next_retry_at = NULL,
			       attempt_id = gen_random_uuid(), try_number = 1, dispatch_attempts = 0,
			       agent_id = ids.ids[1 + t.id % cardinality(ids.ids)],
			       queued_at = $1::timestamptz - interval '20 minutes', claimed_at = $1::timestamptz - interval '20 minutes',
			       started_at = CASE WHEN t.ordinal % 2 = 0 THEN $1::timestamptz - interval '20 minutes' END,
			       last_heartbeat_at = $1::timestamptz - interval '10 minutes'
			  FROM ids
			 WHERE t.run_id IN (SELECT id FROM runs WHERE state = 'running' ORDER BY id DESC LIMIT $2)`, sd.now, staleRuns)
	}
	for _, batch := range []int{staleTIs, reaper.DefaultBatch} {
		name := "batch_10000"
		if batch == reaper.DefaultBatch {
			name = "batch_500"
		}
		b.Run(string(name), func(b *testing.B) {
			ctx := context.Background()
			st := benchOpen(b, sd.url)
			r, err := newReapers(st, sd.now, batch)
			if err != nil {
				b.Fatal(err)
			}
			term := oldTerm(sd.now)
			passes := 0
			// reapAll runs agent-lost passes until every stale TI is reaped.
			reapAll := func(ctx context.Context, r *reaper.Reapers) error {
				reaped := 0
				for reaped < staleTIs {
					rep, err := r.Pass(ctx, state.ReaperAgentLost, term)
					if err != nil {
						return err
					}
					passes++
					if len(rep.Errors) != 0 {
						return fmt.Errorf("agent-lost pass: %v", rep.Errors)
					}
					if len(rep.Candidates) == 0 {
						return fmt.Errorf("reaped %d of %d stale TIs", reaped, staleTIs)
					}
					for _, c := range rep.Candidates {
						if c.Applied {
							reaped++
						}
					}
				}
				return nil
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				replant(b)
				b.StartTimer()
				if err := reapAll(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			st.Close()
			b.ReportMetric(float64(staleTIs), "reaped/op")
			b.ReportMetric(float64(passes)/float64(b.N), "passes/op")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*staleTIs), "us/ti")
			replant(b)
			reportRows(b, sd, 1, func(ctx context.Context, st *store.Store) error {
				r, err := newReapers(st, sd.now, batch)
				if err != nil {
					return err
				}
				return reapAll(ctx, r)
			})
		})
	}
}

// Prunable agents for BenchmarkPruneAgents500: each iteration registers
// pruneAgents agents silent for 45 days, each named by tisPerPruned
// historical TIs (of the newest history runs), and PruneAgents deletes
// them in one batch, unlinking their TIs through ti_agent_idx in the same
// statement.
const (
	pruneAgents  = 500
	tisPerPruned = 10
)

// BenchmarkPruneAgents500 is one PruneAgents call that deletes 500
// inactive agents named by 5,000 historical TIs, beside the seeded scale.
func BenchmarkPruneAgents500(b *testing.B) {
	sd := seedScale(b, issueScale, false)
	{ // the seed's own prunable agents would otherwise join the first batch
		st := benchOpen(b, sd.url)
		if _, err := st.PruneAgents(context.Background(), scaleEpoch, 30*24*time.Hour, 500); err != nil {
			b.Fatal(err)
		}
		st.Close()
	}
	replant := func(b *testing.B) {
		benchExec(b, sd.url, `
			WITH a AS (
			  INSERT INTO agents (name, capacity, state, registered_at, last_heartbeat_at)
			  SELECT 'prune-' || gen_random_uuid(), 4, 'inactive', $1::timestamptz - interval '60 days',
			         $1::timestamptz - interval '45 days'
			    FROM generate_series(1, $2::int) RETURNING id),
			an AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM a),
			tis AS (
			  SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM task_instances
			   WHERE run_id IN (SELECT id FROM runs WHERE state = 'success' ORDER BY id DESC LIMIT $3::int / 50))
			UPDATE task_instances t SET agent_id = an.id
			  FROM tis JOIN an ON an.k = tis.k / $4::int
			 WHERE t.id = tis.id`, sd.now, pruneAgents, pruneAgents*tisPerPruned, tisPerPruned)
	}
	b.Run("500agents_5000tis", func(b *testing.B) {
		ctx := context.Background()
		st := benchOpen(b, sd.url)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			replant(b)
			b.StartTimer()
			n, err := st.PruneAgents(ctx, scaleEpoch, 30*24*time.Hour, pruneAgents)
			if err != nil {
				b.Fatal(err)
			}
			if n != pruneAgents {
				b.Fatalf("pruned %d agents, want %d", n, pruneAgents)
			}
		}
		b.StopTimer()
		st.Close()
		b.ReportMetric(pruneAgents, "agents/op")
		b.ReportMetric(pruneAgents*tisPerPruned, "tis_unlinked/op")
		replant(b)
		reportRows(b, sd, 1, func(ctx context.Context, st *store.Store) error {
			_, err := st.PruneAgents(ctx, scaleEpoch, 30*24*time.Hour, pruneAgents)
			return err
		})
	})
}

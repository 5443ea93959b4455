package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// Burn-down shape of `make bench`'s synthetic phase at the store: a
// backlog of no-tag TIs queued behind heldTIs TIs of a tag no agent
// offers, drained by burnAgents agents of capacity burnCapacity, each
// round one claim long-poll statement and one batched completion.
const (
	burnBacklog  = 40000
	heldTIs      = 8000
	burnAgents   = 4
	burnCapacity = 128
)

// seedBurnDown returns a fresh database holding the backlog (autovacuum
// off on task_instances, as a table of a million history rows is not
// vacuumed within a burn-down) and the agents' ids.
func seedBurnDown(b *testing.B) (string, []int64) {
	b.Helper()
	ctx := context.Background()
	url := storetest.DB(b)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var runID int64
	if err := conn.QueryRow(ctx, `
		WITH d AS (INSERT INTO dags (dag_id, spec, spec_hash, max_active_tasks) VALUES ('burn', '{}', 'seed', 1000000))
		INSERT INTO runs (dag_id, state, max_active_tasks, start_date) VALUES ('burn', 'running', 1000000, now())
		RETURNING id`).Scan(&runID); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, command, required_tags, state, queued_at)
		SELECT $1, 'burn', 'held' || g, g, '{true}', '{held}', 'queued', now() - interval '1 hour' + g * interval '1 ms'
		  FROM generate_series(1, $2::int) g`, runID, heldTIs); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, command, state, queued_at)
		SELECT $1, 'burn', 'noop' || g, $2 + g, '{true}', 'queued', now() + g * interval '1 ms'
		  FROM generate_series(1, $3::int) g`, runID, heldTIs, burnBacklog); err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{`ALTER TABLE task_instances SET (autovacuum_enabled = false)`, `VACUUM ANALYZE task_instances`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	st, err := store.Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var agents []int64
	for i := range burnAgents {
		reg, err := st.Register(ctx, store.Registration{Name: fmt.Sprintf("burn-%d", i), Tags: []string{"bench"}, Capacity: burnCapacity})
		if err != nil {
			b.Fatal(err)
		}
		agents = append(agents, reg.AgentID)
	}
	return url, agents
}

// BenchmarkClaimCompleteBurnDown drains burnBacklog TIs per op, the
// agents taking turns: a claim round for all free slots, then the batch's
// completion (store.CompleteBatch). A round is one statement
// (look_and_claim: store.LookAndClaim, what the claim long-poll runs) or
// the read-only look then the claim (look_then_claim: store.Claimable,
// then store.Claim when it found work and room). It prints TIs/s and the
// mean milliseconds of a round and of a completion; both grow with the
// claimed entries a burn-down leaves in the queue's indexes until vacuum.
// It also prints the WAL bytes per TI of the claim rounds and of the
// completions (walReader): the write work per TI, which load does not
// move (docs/performance.md, "Each TI's write work").
func BenchmarkClaimCompleteBurnDown(b *testing.B) {
	rounds := map[string]func(ctx context.Context, st *store.Store, agent int64) ([]store.ClaimedTask, error){
		"look_and_claim": func(ctx context.Context, st *store.Store, agent int64) ([]store.ClaimedTask, error) {
			_, tasks, err := st.LookAndClaim(ctx, agent, burnCapacity)
			return tasks, err
		},
		"look_then_claim": func(ctx context.Context, st *store.Store, agent int64) ([]store.ClaimedTask, error) {
			c, err := st.Claimable(ctx, agent)
			if err != nil || !c.Queued || c.Room <= 0 {
				return nil, err
			}
			return st.Claim(ctx, agent, burnCapacity)
		},
	}
	for _, name := range []string{"look_then_claim", "look_and_claim"} {
		b.Run(name, func(b *testing.B) { burnDown(b, seedBurnDown, rounds[name]) })
	}
}

// BenchmarkClaimCompleteBurnDownPooled is BenchmarkClaimCompleteBurnDown's
// look_and_claim round over the same backlog in one task pool with a slot
// for every agent slot, the TIs' priority_weight cycling 0..9: the pool
// and priority path's cost (the pool row's lock, the releases the
// completions append and the claims fold; docs/pools.md) beside the
// unpooled figure.
func BenchmarkClaimCompleteBurnDownPooled(b *testing.B) {
	burnDown(b, seedBurnDownPooled, func(ctx context.Context, st *store.Store, agent int64) ([]store.ClaimedTask, error) {
		_, tasks, err := st.LookAndClaim(ctx, agent, burnCapacity)
		return tasks, err
	})
}

// seedBurnDownPooled is seedBurnDown with the no-tag backlog in pool
// burn (burnAgents × burnCapacity slots) and weights 0..9.
func seedBurnDownPooled(b *testing.B) (string, []int64) {
	url, agents := seedBurnDown(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO task_pools (name, slots) VALUES ('burn', %d)`, burnAgents*burnCapacity),
		`UPDATE task_instances SET pool = 'burn', priority_weight = ordinal % 10 WHERE required_tags = '{}'`,
		`VACUUM ANALYZE task_instances`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	return url, agents
}

func burnDown(b *testing.B, seed func(*testing.B) (string, []int64),
	round func(ctx context.Context, st *store.Store, agent int64) ([]store.ClaimedTask, error)) {
	ctx := context.Background()
	var claimT, completeT time.Duration
	var claimWAL, completeWAL float64
	claims, completes, done := 0, 0, 0
	for range b.N {
		b.StopTimer()
		url, agents := seed(b)
		st, err := store.Open(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		wal := walReader(b, url)
		b.StartTimer()
		for left := burnBacklog; left > 0; {
			took := 0
			for _, a := range agents {
				w0 := wal()
				t0 := time.Now()
				tasks, err := round(ctx, st, a)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				w1 := wal()
				claimT += t1.Sub(t0)
				claimWAL += w1 - w0
				claims++
				if len(tasks) == 0 {
					continue
				}
				t2 := time.Now()
				if err := completeAll(ctx, st, a, tasks); err != nil {
					b.Fatal(err)
				}
				completeT += time.Since(t2)
				completeWAL += wal() - w1
				completes++
				left -= len(tasks)
				done += len(tasks)
				took += len(tasks)
			}
			if took == 0 {
				b.Fatalf("no agent took any of the %d TIs left", left)
			}
		}
		b.StopTimer()
		st.Close()
	}
	b.ReportMetric(float64(done)/b.Elapsed().Seconds(), "TIs/s")
	b.ReportMetric(float64(claimT.Microseconds())/1e3/float64(claims), "round-ms")
	b.ReportMetric(float64(completeT.Microseconds())/1e3/float64(completes), "complete-ms")
	b.ReportMetric(claimWAL/float64(done), "claim-WAL-B/TI")
	b.ReportMetric(completeWAL/float64(done), "complete-WAL-B/TI")
}

// walReader returns a function that reads the server's WAL insert
// position in bytes, on a connection of its own that writes nothing: the
// difference around a statement is the WAL it wrote, a figure of its
// write work that the machine's load does not move (nothing else writes
// during the burn-down: autovacuum is off on task_instances).
func walReader(b *testing.B, url string) func() float64 {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close(ctx) })
	return func() float64 {
		var pos float64
		if err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::float8`).Scan(&pos); err != nil {
			b.Fatal(err)
		}
		return pos
	}
}

// completeAll reports every task as a success in one batch.
func completeAll(ctx context.Context, st *store.Store, agentID int64, tasks []store.ClaimedTask) error {
	zero := 0
	reqs := make([]store.Completion, len(tasks))
	for i, t := range tasks {
		reqs[i] = store.Completion{Attempt: t.Attempt, Outcome: state.OutcomeSuccess, ExitCode: &zero}
	}
	for i, r := range st.CompleteBatch(ctx, agentID, reqs) {
		if r.Err != nil {
			return fmt.Errorf("completion of TI %d: %w", reqs[i].TIID, r.Err)
		}
	}
	return nil
}

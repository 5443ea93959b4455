package main

// Seeding: realistic history and live work written with set-based
// INSERT ... SELECT generate_series statements (the shape of
// store/scale_seed_test.go), and the planted work some figures measure
// (TIs to heartbeat, stale TIs to reap, agents to prune). Every statement
// reads the database clock, so the seed is consistent with the clock the
// vigil process reads.

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// seedWidth is the width of every seeded and planted run: the seeded DAG
// and the held DAG have this many tasks.
const seedWidth = 50

// seedAgents live agents own the seeded history and live TIs.
const seedAgents = 40

// maxCapacity is the largest capacity an agent may register with (the
// API's limit), that of the seeded agents.
const maxCapacity = 1024

// prunableTIs historical TIs name each prunable agent, so pruning one also
// unlinks them, as in production.
const prunableTIs = 10

// Tags keep the work of each figure apart: only the bench's own agents
// offer benchTag, so they never claim seeded or planted TIs.
const (
	benchTag  = "bench"
	seededTag = "seeded"
	heldTag   = "held"
)

// DAG ids.
const (
	seededDAG = "history" // seeded history and live runs
	heldDAG   = "held"    // planted running TIs (heartbeat, reap)
	wideDAG   = "wide"    // no-op TIs for throughput
	chainDAG  = "chain"   // a chain for inter-task latency
)

// wideWidth is the width of the throughput DAG (as the runs first
// measured: 1,000-task wide DAGs of `true`).
const wideWidth = 1000

// seededSpec is the DAG of the seeded runs. t37..t49 wait on t30 (running
// in every live run), so the scheduler has nothing to queue in them.
func seededSpec() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "dag_id: %s\nmax_active_tasks: 1000\ntasks:\n", seededDAG)
	for i := 0; i < seedWidth; i++ {
		fmt.Fprintf(&sb, "  - id: t%02d\n    command: [\"true\"]\n    tags: [%s]\n", i, seededTag)
		if i >= 37 {
			sb.WriteString("    depends_on: [t30]\n")
		}
	}
	return sb.String()
}

// wideSpec, heldSpec and chainSpec are the DAGs the figures use.
func wideSpec() string       { return flatSpec(wideDAG, wideWidth, benchTag, false) }
func heldSpec() string       { return flatSpec(heldDAG, seedWidth, heldTag, false) }
func chainSpec(n int) string { return flatSpec(chainDAG, n, benchTag, true) }

// flatSpec is a DAG of n `true` tasks tagged tag; chained, each depends
// on the one before.
func flatSpec(id string, n int, tag string, chained bool) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "dag_id: %s\nmax_active_tasks: %d\ntasks:\n", id, max(n, 1))
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "  - id: t%04d\n    command: [\"true\"]\n    tags: [%s]\n", i, tag)
		if chained && i > 0 {
			fmt.Fprintf(&sb, "    depends_on: [t%04d]\n", i-1)
		}
	}
	return sb.String()
}

// seedCounts is what seed wrote.
type seedCounts struct {
	HistoryTIs, LiveTIs, PrunableAgents int64
}

// seed writes, on a database with the seeded DAG applied: seedAgents live
// agents; historyRuns terminal runs × seedWidth success TIs (one event
// each, a log line for every fifth), ending within the last day; liveRuns
// running runs × seedWidth TIs (per run 30 success, 4 running, 2 queued,
// 1 up_for_retry due in an hour, 13 waiting on t30); and prunable
// inactive agents silent for 60 days, each named by prunableTIs
// historical TIs. The live agents' heartbeats are as of now: the bench
// runs vigil with an agent-lost threshold they outlive.
func seed(ctx context.Context, conn *pgx.Conn, historyRuns, liveRuns, prunable int) (seedCounts, error) {
	steps := append(historySteps(historyRuns, prunable), liveSteps(liveRuns)...)
	for _, s := range steps {
		if _, err := conn.Exec(ctx, s.sql, s.args...); err != nil {
			return seedCounts{}, fmt.Errorf("seed %s: %w", s.name, err)
		}
	}
	var c seedCounts
	err := conn.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM task_instances t JOIN runs r ON r.id = t.run_id WHERE r.state = 'success'),
		       (SELECT count(*) FROM task_instances t JOIN runs r ON r.id = t.run_id WHERE r.state = 'running'),
		       (SELECT count(*) FROM agents WHERE name LIKE 'prunable-%')`).Scan(&c.HistoryTIs, &c.LiveTIs, &c.PrunableAgents)
	return c, err
}

// seedStep is one seeding statement.
type seedStep struct {
	name string
	sql  string
	args []any
}

// historySteps write the agents, the terminal history with its events and
// logs, and the prunable agents' share of it.
func historySteps(historyRuns, prunable int) []seedStep {
	return []seedStep{
		{"live agents", `
			INSERT INTO agents (name, tags, capacity, state, registered_at, last_heartbeat_at, oldest_heartbeat_at)
			SELECT 'seeded-' || g, ARRAY[$2], 1024, 'active', now() - interval '1 day', now(), now() - interval '5 seconds'
			  FROM generate_series(1, $1::int) g`, []any{seedAgents, seededTag}},
		{"prunable agents", `
			INSERT INTO agents (name, capacity, state, registered_at, last_heartbeat_at)
			SELECT 'prunable-' || g, 4, 'inactive', now() - interval '61 days', now() - interval '60 days'
			  FROM generate_series(1, $1::int) g`, []any{prunable}},
		{"history", `
			WITH ag AS (SELECT array_agg(id ORDER BY id) AS ids FROM agents WHERE name LIKE 'seeded-%'),
			r AS (
			  INSERT INTO runs (dag_id, state, message, max_active_tasks, queued_at, start_date, end_date, updated_at)
			  SELECT $1, 'success', 'all tasks succeeded or were skipped', 1000, e - interval '10 minutes',
			         e - interval '9 minutes', e, e
			    FROM (SELECT now() - interval '1 day' + g * (interval '1 day' / $2::int) AS e
			            FROM generate_series(1, $2::int) g) x
			   ORDER BY e
			  RETURNING id, start_date, end_date)
			INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, state, command, required_tags, upstream,
			       try_number, attempt_id, agent_id, queued_at, claimed_at, started_at, last_heartbeat_at,
			       end_date, exit_code, updated_at)
			SELECT r.id, $1, 't' || lpad(o::text, 2, '0'), o, 'success', '{true}', ARRAY[$3],
			       CASE WHEN o >= 37 THEN '{t30}'::text[] ELSE '{}' END, 1, gen_random_uuid(),
			       ag.ids[1 + (r.id * 50 + o) % cardinality(ag.ids)], r.start_date, r.start_date, r.start_date,
			       r.end_date, r.end_date, 0, r.end_date
			  FROM r, ag, generate_series(0, $4::int - 1) o
			 ORDER BY r.id, o`, []any{seededDAG, historyRuns, seededTag, seedWidth}},
		{"prunable agents' TIs", `
			WITH old AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM agents WHERE name LIKE 'prunable-%'),
			pick AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM task_instances
			          WHERE dag_id = $1 AND state = 'success' ORDER BY id LIMIT $2)
			UPDATE task_instances t SET agent_id = old.id
			  FROM pick JOIN old ON old.k = pick.k % $3
			 WHERE t.id = pick.id`, []any{seededDAG, prunable * prunableTIs, prunable}},
		{"history events", `
			INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message, created_at)
			SELECT run_id, id, task_id, 1, attempt_id, agent_id, 'ti_success', 'exit 0', end_date
			  FROM task_instances ORDER BY id`, nil},
		{"run events", `
			INSERT INTO events (run_id, kind, message, created_at)
			SELECT id, 'run_success', message, end_date FROM runs ORDER BY id`, nil},
		{"history logs", `
			INSERT INTO task_logs (ti_id, try_number, attempt_id, seq, stream, ts, line, received_at)
			SELECT id, 1, attempt_id, 1, 'stdout', end_date, 'done', end_date FROM task_instances
			 WHERE ordinal % 5 = 0 ORDER BY id`, nil},
	}
}

// liveSteps write the running runs and their TIs, then VACUUM ANALYZE so
// that plans and the visibility map are those of a settled table.
func liveSteps(liveRuns int) []seedStep {
	return []seedStep{
		{"live runs", `
			WITH ag AS (SELECT array_agg(id ORDER BY id) AS ids FROM agents WHERE name LIKE 'seeded-%'),
			r AS (
			  INSERT INTO runs (dag_id, state, max_active_tasks, queued_at, start_date, updated_at)
			  SELECT $1, 'running', 1000, now() - interval '21 minutes', now() - interval '20 minutes', now()
			    FROM generate_series(1, $2::int)
			  RETURNING id),
			ti AS (
			  SELECT r.id AS run_id, o,
			         CASE WHEN o < 30 THEN 'success' WHEN o < 34 THEN 'running' WHEN o < 36 THEN 'queued'
			              WHEN o = 36 THEN 'up_for_retry' ELSE 'none' END AS state,
			         ag.ids[1 + (r.id * 4 + o) % cardinality(ag.ids)] AS agent
			    FROM r, ag, generate_series(0, $4::int - 1) o)
			INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, state, reason, command, required_tags,
			       upstream, try_number, attempt_id, agent_id, queued_at, claimed_at, started_at, last_heartbeat_at,
			       end_date, exit_code, next_retry_at, retries, updated_at)
			SELECT run_id, $1, 't' || lpad(o::text, 2, '0'), o, state,
			       CASE state WHEN 'up_for_retry' THEN 'exit_code' END, '{true}', ARRAY[$3],
			       CASE WHEN o >= 37 THEN '{t30}'::text[] ELSE '{}' END,
			       CASE WHEN state IN ('success', 'running', 'up_for_retry') THEN 1 ELSE 0 END,
			       CASE WHEN state IN ('success', 'running') THEN gen_random_uuid() END,
			       CASE WHEN state IN ('success', 'running') THEN agent END,
			       CASE state WHEN 'success' THEN now() - interval '19 minutes'
			                  WHEN 'running' THEN now() - interval '5 minutes'
			                  WHEN 'queued' THEN now() - interval '30 seconds' END,
			       CASE state WHEN 'success' THEN now() - interval '19 minutes'
			                  WHEN 'running' THEN now() - interval '5 minutes' END,
			       CASE WHEN state IN ('success', 'running') THEN now() - interval '5 minutes' END,
			       CASE state WHEN 'success' THEN now() - interval '10 minutes' WHEN 'running' THEN now() END,
			       CASE state WHEN 'success' THEN now() - interval '10 minutes'
			                  WHEN 'up_for_retry' THEN now() - interval '1 minute' END,
			       CASE state WHEN 'success' THEN 0 WHEN 'up_for_retry' THEN 1 END,
			       CASE state WHEN 'up_for_retry' THEN now() + interval '1 hour' END,
			       CASE state WHEN 'up_for_retry' THEN 3 ELSE 0 END,
			       now()
			  FROM ti ORDER BY run_id, o`, []any{seededDAG, liveRuns, seededTag, seedWidth}},
		{"vacuum", `VACUUM (ANALYZE)`, nil},
	}
}

// heldTI is one planted running TI: what its agent heartbeats.
type heldTI struct {
	AgentID, TIID int64
	AttemptID     string
}

// plantRunning inserts n running TIs of the held DAG (runs of seedWidth,
// n rounded up), claimed and started silentFor ago and owned round-robin
// by agentIDs, whose heartbeat stamps are set to match. silentFor 0 plants
// healthy work (heartbeat ingest); more than the agent-lost threshold
// plants work to reap. retries 0: a reaped TI fails instead of returning
// to the queue.
func plantRunning(ctx context.Context, conn *pgx.Conn, agentIDs []int64, n int, silentFor string) ([]heldTI, error) {
	rows, err := conn.Query(ctx, `
		WITH stamp AS (SELECT now() - $5::interval AS at),
		ag AS (UPDATE agents SET state = 'active', last_heartbeat_at = stamp.at, oldest_heartbeat_at = stamp.at
		         FROM stamp WHERE id = ANY($1) RETURNING id),
		ids AS (SELECT array_agg(id ORDER BY id) AS ids FROM ag),
		r AS (
		  INSERT INTO runs (dag_id, state, max_active_tasks, queued_at, start_date, updated_at)
		  SELECT $2, 'running', 1000, stamp.at, stamp.at, stamp.at
		    FROM stamp, generate_series(1, ($3::int + $4::int - 1) / $4::int)
		  RETURNING id),
		ti AS (SELECT r.id AS run_id, o, row_number() OVER (ORDER BY r.id, o) AS k
		         FROM r, generate_series(0, $4::int - 1) o)
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, state, command, required_tags, try_number,
		       attempt_id, agent_id, queued_at, claimed_at, started_at, last_heartbeat_at, updated_at)
		SELECT ti.run_id, $2, 't' || lpad(ti.o::text, 4, '0'), ti.o, 'running', '{true}', ARRAY[$6], 1,
		       gen_random_uuid(), ids.ids[1 + (ti.k - 1) % cardinality(ids.ids)],
		       stamp.at, stamp.at, stamp.at, stamp.at, stamp.at
		  FROM ti, ids, stamp
		 ORDER BY ti.run_id, ti.o
		RETURNING agent_id, id, attempt_id::text`, agentIDs, heldDAG, n, seedWidth, silentFor, heldTag)
	if err != nil {
		return nil, fmt.Errorf("plant running TIs: %w", err)
	}
	held, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (heldTI, error) {
		var h heldTI
		return h, r.Scan(&h.AgentID, &h.TIID, &h.AttemptID)
	})
	if err != nil {
		return nil, fmt.Errorf("plant running TIs: %w", err)
	}
	return held, nil
}

// insertSilentAgents adds n agents that never registered through the API
// (their TIs are planted, not claimed) and returns their ids.
func insertSilentAgents(ctx context.Context, conn *pgx.Conn, prefix string, n int) ([]int64, error) {
	rows, err := conn.Query(ctx, `
		INSERT INTO agents (name, tags, capacity, registered_at, last_heartbeat_at)
		SELECT $1 || g, ARRAY[$3], 1024, now(), now() FROM generate_series(1, $2::int) g RETURNING id`,
		prefix, n, heldTag)
	if err != nil {
		return nil, fmt.Errorf("insert agents %s*: %w", prefix, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

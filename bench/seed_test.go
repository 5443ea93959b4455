package main

import (
	"bufio"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func bufioScanner(s string) *bufio.Scanner { return bufio.NewScanner(strings.NewReader(s)) }

// seededDB applies the bench's DAGs to a fresh database and seeds it at a
// small scale.
func seededDB(t *testing.T, historyRuns, liveRuns, prunable int) (*pgx.Conn, seedCounts) {
	t.Helper()
	ctx := context.Background()
	url := storetest.DB(t)
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	for _, src := range []string{seededSpec(), heldSpec(), wideSpec(), chainSpec(5)} {
		spec, err := dag.Parse([]byte(src))
		require.NoError(t, err, src)
		_, err = st.ApplyDAG(ctx, spec)
		require.NoError(t, err)
	}
	st.Close()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	c, err := seed(ctx, conn, historyRuns, liveRuns, prunable)
	require.NoError(t, err)
	return conn, c
}

// TestSeedShape checks what the seed wrote: the history, the live runs'
// states, the prunable agents and their TIs, and that the seeded TIs
// match the seeded DAG, so the scheduler finds nothing to do in them.
func TestSeedShape(t *testing.T) {
	ctx := context.Background()
	conn, c := seededDB(t, 20, 3, 4)
	require.Equal(t, seedCounts{HistoryTIs: 20 * seedWidth, LiveTIs: 3 * seedWidth, PrunableAgents: 4}, c)

	rows, err := conn.Query(ctx, `
		SELECT t.state, count(*) FROM task_instances t JOIN runs r ON r.id = t.run_id
		 WHERE r.state = 'running' GROUP BY t.state ORDER BY t.state`)
	require.NoError(t, err)
	perState := map[string]int{}
	var st string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error { perState[st] = n; return nil })
	require.NoError(t, err)
	require.Equal(t, map[string]int{"success": 90, "running": 12, "queued": 6, "up_for_retry": 3, "none": 39}, perState)

	var prunedTIs, badTags, badUpstream, events, logs int
	require.NoError(t, conn.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM task_instances t JOIN agents a ON a.id = t.agent_id WHERE a.name LIKE 'prunable-%'),
		       (SELECT count(*) FROM task_instances WHERE required_tags <> ARRAY['seeded']),
		       (SELECT count(*) FROM task_instances WHERE (ordinal >= 37) <> (upstream = '{t30}')),
		       (SELECT count(*) FROM events),
		       (SELECT count(*) FROM task_logs)`).Scan(&prunedTIs, &badTags, &badUpstream, &events, &logs))
	require.Equal(t, 4*prunableTIs, prunedTIs)
	require.Zero(t, badTags)
	require.Zero(t, badUpstream)
	require.Equal(t, 20*seedWidth+20, events) // a ti_success per TI, a run_success per run
	require.Equal(t, 20*seedWidth/5, logs)

	// Every running TI is owned by a live seeded agent whose heartbeat is
	// as of the seed, and the agents registered before credentials (NULL)
	// so the bench can adopt them by name.
	var orphans, stale, withCredential int
	require.NoError(t, conn.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM task_instances t LEFT JOIN agents a ON a.id = t.agent_id
		         WHERE t.state = 'running' AND (a.name IS NULL OR a.name NOT LIKE 'seeded-%')),
		       (SELECT count(*) FROM agents WHERE name LIKE 'seeded-%' AND last_heartbeat_at < now() - interval '1 minute'),
		       (SELECT count(*) FROM agents WHERE credential_hash IS NOT NULL)`).Scan(&orphans, &stale, &withCredential))
	require.Zero(t, orphans)
	require.Zero(t, stale)
	require.Zero(t, withCredential)
}

// TestPlantRunning checks the planted running TIs: n of them (whole runs),
// shared round-robin by the agents, stamped silentFor ago with the agents'
// heartbeats.
func TestPlantRunning(t *testing.T) {
	ctx := context.Background()
	conn, _ := seededDB(t, 1, 1, 1)
	ids, err := insertSilentAgents(ctx, conn, "silent-", 3)
	require.NoError(t, err)
	held, err := plantRunning(ctx, conn, ids, 2*seedWidth, "3 hours")
	require.NoError(t, err)
	require.Len(t, held, 2*seedWidth)
	per := map[int64]int{}
	for _, h := range held {
		per[h.AgentID]++
		require.NotEmpty(t, h.AttemptID)
	}
	require.Equal(t, map[int64]int{ids[0]: 34, ids[1]: 33, ids[2]: 33}, per)
	var silentTIs, silentAgents int
	require.NoError(t, conn.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM task_instances WHERE dag_id = 'held' AND state = 'running'
		          AND last_heartbeat_at < now() - interval '179 minutes' AND required_tags = ARRAY['held']),
		       (SELECT count(*) FROM agents WHERE id = ANY($1) AND state = 'active'
		          AND oldest_heartbeat_at < now() - interval '179 minutes')`, ids).Scan(&silentTIs, &silentAgents))
	require.Equal(t, 2*seedWidth, silentTIs)
	require.Equal(t, 3, silentAgents)
}

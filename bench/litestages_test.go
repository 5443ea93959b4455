package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLiteStages plants stamps on one live run's 30 successful TIs: claimed
// 100 ms apart on one agent, started 10 ms and ended 30 ms after the
// claim. The stages must read exactly that: claim → start 10 ms, start →
// end 20 ms, end → next claim 70 ms, and 30/100 of a slot taken over the
// span; the run's other TIs are named as not succeeded, by state, and the
// wait for ended TIs counts the success ones only among the terminal.
func TestLiteStages(t *testing.T) {
	ctx := context.Background()
	conn, _ := seededDB(t, 20, 3, 4)
	var run int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT min(id) FROM runs WHERE state = 'running'`).Scan(&run))
	_, err := conn.Exec(ctx, `
		WITH s AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS i FROM task_instances WHERE run_id = $1 AND state = 'success')
		UPDATE task_instances t
		   SET agent_id = (SELECT min(id) FROM agents),
		       claimed_at = '2026-01-01 00:00:00+00'::timestamptz + s.i * interval '100 ms',
		       started_at = '2026-01-01 00:00:00.010+00'::timestamptz + s.i * interval '100 ms',
		       end_date = '2026-01-01 00:00:00.030+00'::timestamptz + s.i * interval '100 ms'
		  FROM s WHERE t.id = s.id`, run)
	require.NoError(t, err)

	var out bytes.Buffer
	e := &env{cfg: defaultConfig(), out: &reporter{w: &out, vals: map[string]float64{}}}
	require.NoError(t, e.liteStages(ctx, conn, []int64{run}))
	v := e.out.vals
	require.InDelta(t, 10, v["lite_claim_start_p50"], 1e-6)
	require.InDelta(t, 10, v["lite_claim_start_p99"], 1e-6)
	require.InDelta(t, 20, v["lite_start_end_p50"], 1e-6)
	require.InDelta(t, 70, v["lite_end_claim_p99"], 1e-6)
	require.InDelta(t, 30*0.030/(29*0.100+0.030), v["lite_busy"], 1e-9, out.String())

	n, err := ended(ctx, conn, []int64{run})
	require.NoError(t, err)
	require.EqualValues(t, 30, n, "30 success; running, queued, up_for_retry and none are not terminal")
	out.Reset()
	require.NoError(t, e.unfinished(ctx, conn, "lite burn-down", []int64{run}))
	require.Contains(t, out.String(), "# lite burn-down: 4 TIs running")
	require.Contains(t, out.String(), "# lite burn-down: 2 TIs queued")
	require.Contains(t, out.String(), "on agent")
}

// TestLiteSupervisors reads the agents' start-up records from a Lite log
// as the in-process agents write them, among other lines.
func TestLiteSupervisors(t *testing.T) {
	log := filepath.Join(t.TempDir(), "vigil-lite.log")
	require.NoError(t, os.WriteFile(log, []byte(`not json
{"level":"INFO","msg":"vigil lite ready"}
{"level":"INFO","msg":"task supervisor","component":"agent","path":"/b/vigil-supervise","args":null}
{"level":"INFO","msg":"task supervisor","component":"agent","path":"/b/vigil-supervise","args":null}
`), 0o644))
	var out bytes.Buffer
	e := &env{out: &reporter{w: &out, vals: map[string]float64{}}}
	e.liteSupervisors(log)
	require.Equal(t, "# lite task supervisor: /b/vigil-supervise (2 agents)\n", out.String())

	require.NoError(t, os.WriteFile(log, []byte(`{"msg":"task supervisor","path":"/b/vigil","args":["__supervise"]}`+"\n"), 0o644))
	out.Reset()
	e.liteSupervisors(log)
	require.Equal(t, "# lite task supervisor: /b/vigil __supervise (1 agents)\n", out.String())
}

package main

// The API at a year of history (issue 27): `-only api-history` seeds a
// year of terminal runs and their TIs with set-based SQL, plus one run of
// bigRunWidth TIs with a few thousand events, then times the operator
// API's read endpoints on a real vigil process serving that database.
// It is not part of the full run: 20M TIs take far longer to seed than
// every other figure together take to measure.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
)

// apiDAGs is how many DAGs share the seeded history ("api-0".."api-4");
// apiBigDAG holds the one run of bigRunWidth TIs.
const (
	apiDAGs     = 5
	apiBigDAG   = "api-big"
	apiTag      = "api-history" // offered by no agent: nothing seeded is ever claimed
	bigRunWidth = 10000
	// bigRunMidTask is the task id halfway through the big run (its task
	// ids are t0000..t9999), the cursor of a middle page of its TIs.
	bigRunMidTask = "t4999"
	// bigRunTraced TIs of the big run have a claimed, a started and a
	// success event each: a few thousand events.
	bigRunTraced = 1000
	// apiFailedEvery: every apiFailedEvery-th run failed (about 5%), its
	// last TI with exit code 1; the others succeeded. Prime to apiDAGs,
	// so that every DAG has failed runs.
	apiFailedEvery = 19
	// apiSeedChunk runs are written per statement, so progress shows and
	// no statement holds the whole year.
	apiSeedChunk = 50000
	// apiRequests sequential requests are timed per endpoint, after
	// apiWarmup untimed ones.
	apiRequests = 300
	apiWarmup   = 5
	// apiTargetP99 is issue 27's target for every read.
	apiTargetP99 = 50 * time.Millisecond
)

// apiDAG is the id of the i-th history DAG.
func apiDAG(i int) string { return fmt.Sprintf("api-%d", i) }

// apiWidth is the number of tasks of each history DAG: the most TIs any
// seeded run holds when tis are spread evenly over runs.
func apiWidth(runs, tis int) int { return (tis + runs - 1) / runs }

// apiSpecs are the history DAGs and the big run's DAG.
func apiSpecs(runs, tis int) []string {
	specs := make([]string, 0, apiDAGs+1)
	for i := 0; i < apiDAGs; i++ {
		specs = append(specs, flatSpec(apiDAG(i), apiWidth(runs, tis), apiTag, false))
	}
	return append(specs, flatSpec(apiBigDAG, bigRunWidth, apiTag, false))
}

// apiSeedChunkSQL writes runs lo..hi of n (k = 1..n, ending evenly over
// the last 365 days) with their TIs and events. Run k belongs to DAG
// k % apiDAGs and holds tis/n TIs, one more for k ≤ tis % n; every
// apiFailedEvery-th run failed on its last TI (reason exit_code, a
// ti_failed event), the others succeeded. Each run has its final event.
// Parameters: $1 lo, $2 hi, $3 n, $4 tis, $5 apiDAGs, $6 apiFailedEvery,
// $7 apiTag.
const apiSeedChunkSQL = `
	WITH ag AS (SELECT array_agg(id ORDER BY id) AS ids FROM agents WHERE name LIKE 'api-agent-%'),
	r AS (
	  INSERT INTO runs (dag_id, state, reason, message, max_active_tasks, queued_at, start_date, end_date, updated_at)
	  SELECT 'api-' || (k % $5::int), CASE WHEN k % $6::int = 0 THEN 'failed' ELSE 'success' END,
	         CASE WHEN k % $6::int = 0 THEN 'exit_code' END,
	         CASE WHEN k % $6::int = 0 THEN 'a task failed' ELSE 'all tasks succeeded or were skipped' END,
	         1000, e - interval '10 minutes', e - interval '9 minutes', e, e
	    FROM (SELECT k, now() - interval '365 days' + k * (interval '365 days' / $3::int) AS e
	            FROM generate_series($1::int, $2::int) k) x
	   ORDER BY k
	  RETURNING id, dag_id, state, message, start_date, end_date),
	rk AS (SELECT r.*, $1::int - 1 + row_number() OVER (ORDER BY id) AS k FROM r),
	t AS (
	  INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, state, reason, command, required_tags,
	         try_number, attempt_id, agent_id, queued_at, claimed_at, started_at, last_heartbeat_at,
	         end_date, exit_code, updated_at)
	  SELECT rk.id, rk.dag_id, 't' || lpad(o::text, 4, '0'), o,
	         CASE WHEN rk.state = 'failed' AND o = w.n - 1 THEN 'failed' ELSE 'success' END,
	         CASE WHEN rk.state = 'failed' AND o = w.n - 1 THEN 'exit_code' END,
	         '{true}', ARRAY[$7], 1, gen_random_uuid(), ag.ids[1 + (rk.k + o) % cardinality(ag.ids)],
	         rk.start_date, rk.start_date, rk.start_date, rk.end_date, rk.end_date,
	         CASE WHEN rk.state = 'failed' AND o = w.n - 1 THEN 1 ELSE 0 END, rk.end_date
	    FROM rk CROSS JOIN ag
	    CROSS JOIN LATERAL (SELECT $4::bigint / $3::int + CASE WHEN rk.k <= $4::bigint % $3::int THEN 1 ELSE 0 END AS n) w
	    CROSS JOIN LATERAL generate_series(0, w.n::int - 1) o
	   ORDER BY rk.id, o
	  RETURNING id, run_id, task_id, attempt_id, agent_id, state, end_date)
	INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message, created_at)
	SELECT run_id, id, task_id, 1, attempt_id, agent_id, 'ti_failed', 'exit 1', end_date FROM t WHERE state = 'failed'
	UNION ALL
	SELECT id, NULL, NULL, NULL, NULL, NULL, CASE state WHEN 'failed' THEN 'run_failed' ELSE 'run_success' END,
	       message, end_date FROM r`

// apiBigRunSQL writes the big run an hour ago: bigRunWidth successful
// TIs of apiBigDAG, the first bigRunTraced with their claimed, started
// and success events, and its run_success event; it returns the run's id.
// Parameters: $1 apiBigDAG, $2 bigRunWidth, $3 bigRunTraced, $4 apiTag.
const apiBigRunSQL = `
	WITH ag AS (SELECT array_agg(id ORDER BY id) AS ids FROM agents WHERE name LIKE 'api-agent-%'),
	r AS (
	  INSERT INTO runs (dag_id, state, message, max_active_tasks, queued_at, start_date, end_date, updated_at)
	  VALUES ($1, 'success', 'all tasks succeeded or were skipped', 1000, now() - interval '70 minutes',
	          now() - interval '69 minutes', now() - interval '1 hour', now() - interval '1 hour')
	  RETURNING id, start_date, end_date),
	t AS (
	  INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, state, command, required_tags, try_number,
	         attempt_id, agent_id, queued_at, claimed_at, started_at, last_heartbeat_at, end_date, exit_code, updated_at)
	  SELECT r.id, $1, 't' || lpad(o::text, 4, '0'), o, 'success', '{true}', ARRAY[$4], 1, gen_random_uuid(),
	         ag.ids[1 + o % cardinality(ag.ids)], r.start_date, r.start_date, r.start_date, r.end_date, r.end_date, 0,
	         r.end_date
	    FROM r, ag, generate_series(0, $2::int - 1) o
	   ORDER BY o
	  RETURNING id, run_id, task_id, ordinal, attempt_id, agent_id, claimed_at, end_date),
	ev AS (
	  INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message, created_at)
	  SELECT run_id, id, task_id, 1, attempt_id, agent_id, k.kind, k.message, k.at
	    FROM t CROSS JOIN LATERAL (VALUES ('ti_claimed', '', t.claimed_at), ('ti_started', '', t.claimed_at),
	                                      ('ti_success', 'exit 0', t.end_date)) k(kind, message, at)
	   WHERE t.ordinal < $3::int
	  UNION ALL
	  SELECT r.id, NULL, NULL, NULL, NULL, NULL, 'run_success', 'all tasks succeeded or were skipped', r.end_date FROM r)
	SELECT id FROM r`

// apiSeedCounts is what seedAPIHistory wrote.
type apiSeedCounts struct {
	Runs, FailedRuns, TIs, Events int64
	BigRun                        int64 // the run of bigRunWidth TIs
}

// seedAPIHistory writes, on a database with apiSpecs applied, 20
// inactive agents that ran the history, runs runs holding tis TIs in
// all (apiSeedChunkSQL, chunk runs a statement), the big run, then
// VACUUM (ANALYZE). progress is called after each chunk with the runs
// written so far.
func seedAPIHistory(ctx context.Context, conn *pgx.Conn, runs, tis, chunk int, progress func(done int)) (apiSeedCounts, error) {
	var c apiSeedCounts
	if _, err := conn.Exec(ctx, `
		INSERT INTO agents (name, tags, capacity, state, registered_at, last_heartbeat_at)
		SELECT 'api-agent-' || g, ARRAY[$1], 64, 'inactive', now() - interval '366 days', now() - interval '1 day'
		  FROM generate_series(1, 20) g`, apiTag); err != nil {
		return c, fmt.Errorf("seed api agents: %w", err)
	}
	for lo := 1; lo <= runs; lo += chunk {
		hi := min(lo+chunk-1, runs)
		if _, err := conn.Exec(ctx, apiSeedChunkSQL, lo, hi, runs, tis, apiDAGs, apiFailedEvery, apiTag); err != nil {
			return c, fmt.Errorf("seed api history runs %d..%d: %w", lo, hi, err)
		}
		progress(hi)
	}
	if err := conn.QueryRow(ctx, apiBigRunSQL, apiBigDAG, bigRunWidth, bigRunTraced, apiTag).Scan(&c.BigRun); err != nil {
		return c, fmt.Errorf("seed api big run: %w", err)
	}
	if _, err := conn.Exec(ctx, `VACUUM (ANALYZE)`); err != nil {
		return c, fmt.Errorf("seed api history: vacuum: %w", err)
	}
	err := conn.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM runs WHERE state = 'failed'),
		       (SELECT count(*) FROM task_instances), (SELECT count(*) FROM events)`).
		Scan(&c.Runs, &c.FailedRuns, &c.TIs, &c.Events)
	return c, err
}

// onlyAPIHistory is `-only api-history`: the history DAGs, the seed, then
// the read figures on one vigil process with no agents.
func (e *env) onlyAPIHistory(ctx context.Context) error {
	st, err := e.openStore(ctx)
	if err != nil {
		return err
	}
	err = applySpecs(ctx, st, apiSpecs(e.cfg.APIRuns, e.cfg.APITIs))
	st.Close()
	if err != nil {
		return err
	}
	conn, err := e.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	e.progress("seed api history", "runs", e.cfg.APIRuns, "tis", e.cfg.APITIs)
	start := time.Now()
	c, err := seedAPIHistory(ctx, conn, e.cfg.APIRuns, e.cfg.APITIs, apiSeedChunk, func(done int) {
		e.progress("seed api history", "runs_written", done)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out.w, "# seeded %d runs (%d failed), %d TIs, %d events over 365 days in %.0fs (with VACUUM ANALYZE); load average %s\n",
		c.Runs, c.FailedRuns, c.TIs, c.Events, time.Since(start).Seconds(), loadAverage())
	v, err := e.startVigil(ctx, "vigil-api", "--agents", "0")
	if err != nil {
		return err
	}
	defer v.stop(30 * time.Second)
	if err := e.apiReads(ctx, v, c.BigRun); err != nil {
		return err
	}
	fmt.Fprintf(e.out.w, "# load average after the reads %s\n", loadAverage())
	return v.stop(30 * time.Second)
}

// apiRead is one timed endpoint.
type apiRead struct{ label, path string }

// apiReadsOf are issue 27's reads: the first page of runs with and
// without a DAG and a state filter, two pages of the big run's TIs, a
// page of its events,
// a DAG's grid of 25 runs, at-risk and the cluster view.
func apiReadsOf(bigRun int64) []apiRead {
	dagID := apiDAG(1)
	return []apiRead{
		{"GET /v1/runs", "/v1/runs"},
		{"GET /v1/runs?dag_id", "/v1/runs?dag_id=" + dagID},
		{"GET /v1/runs?state=failed", "/v1/runs?state=failed"},
		{"GET /v1/runs?dag_id&state=failed", "/v1/runs?state=failed&dag_id=" + dagID},
		// The run's TIs come 1,000 a page (protocol.TIsPageMax) in task id
		// order: the first page, and one from the middle of the run.
		{"GET /v1/runs/{id} (10,000 TIs, first page)", fmt.Sprintf("/v1/runs/%d", bigRun)},
		{"GET /v1/runs/{id}?after=<mid> (10,000 TIs, a middle page)", fmt.Sprintf("/v1/runs/%d?after=%s", bigRun, bigRunMidTask)},
		{"GET /v1/runs/{id}/events (10,000 TIs)", fmt.Sprintf("/v1/runs/%d/events", bigRun)},
		{"GET /v1/dags/{id}/grid?limit=25", "/v1/dags/" + dagID + "/grid?limit=25"},
		{"GET /v1/at-risk", "/v1/at-risk"},
		{"GET /v1/cluster", "/v1/cluster"},
	}
}

// apiReads times each read: apiWarmup untimed requests, then
// apiRequests sequential ones, each read to its end and required to be
// 200; one line per read with p99 against apiTargetP99, p50 and n.
func (e *env) apiReads(ctx context.Context, v *vigilProc, bigRun int64) error {
	hc := &http.Client{Timeout: time.Minute}
	for _, rd := range apiReadsOf(bigRun) {
		e.progress("api read", "path", rd.path)
		lat := make([]time.Duration, 0, apiRequests)
		for i := 0; i < apiWarmup+apiRequests; i++ {
			d, err := timedGet(ctx, hc, v.base+rd.path, e.opTok)
			if err != nil {
				return fmt.Errorf("%s: %w", rd.label, err)
			}
			if i >= apiWarmup {
				lat = append(lat, d)
			}
		}
		p50, p99 := percentile(lat, 50), percentile(lat, 99)
		e.out.figure("", rd.label+" p99", msf(p99), "ms", fmt.Sprintf("p50 %s ms, n %d; target p99 ≤ %s: %s",
			ms(p50), len(lat), apiTargetP99, metOrMissed(p99, apiTargetP99)))
	}
	return nil
}

// metOrMissed says whether d is within target.
func metOrMissed(d, target time.Duration) string {
	if d <= target {
		return "met"
	}
	return "MISSED"
}

// timedGet is one GET with the operator token, read to its end: the time
// from sending to the body's last byte. A status other than 200 is an
// error carrying the start of the body.
func timedGet(ctx context.Context, hc *http.Client, url, token string) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("GET %s: HTTP %d: %s", url, resp.StatusCode, b)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	return time.Since(start), nil
}

package main

// Where a Lite burn-down's TIs spent their slot time, and what did not
// succeed, from the database clock (task_instances: claimed_at,
// started_at, end_date). The rate alone cannot tell a slow task start
// from a slot that waits to be claimed again.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
)

// terminalStates are the TI states no scheduler step leaves (state.TI.Terminal).
func terminalStates() []string {
	var out []string
	for _, s := range state.TIStates() {
		if s.Terminal() {
			out = append(out, string(s))
		}
	}
	return out
}

// ended counts the TIs of runs in a terminal state. A burn-down waits for
// these, not for successes: a TI that failed ends the wait and is
// reported (unfinished), instead of holding the wait until -phase-timeout
// as if it were still to come.
func ended(ctx context.Context, conn *pgx.Conn, runs []int64) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, `SELECT count(*) FROM task_instances WHERE run_id = ANY($1) AND state = ANY($2)`,
		runs, terminalStates()).Scan(&n)
	return n, err
}

// stagesSQL measures the successful TIs of runs ($1): p50 and p99 of
// claim → start (the start is stamped by the heartbeat the agent sends
// once the process runs) and of start → end (the process under its
// supervisor, then the completion's trip until it commits), in ms; p50
// and p99 of end → next claim on the same agent (for each claim, the
// time since that agent's latest completion before it: how soon a freed
// slot is claimed again); and the mean number of slots the server saw
// taken (the claim → end spans summed over the burn-down's span).
const stagesSQL = `
	WITH t AS (
	  SELECT agent_id, claimed_at, started_at, end_date FROM task_instances
	   WHERE run_id = ANY($1) AND state = 'success' AND started_at IS NOT NULL),
	ev AS (
	  SELECT agent_id, end_date AS at, false AS claim FROM t
	  UNION ALL
	  SELECT DISTINCT agent_id, claimed_at, true FROM t),
	w AS (
	  SELECT claim, at, max(CASE WHEN NOT claim THEN at END)
	         OVER (PARTITION BY agent_id ORDER BY at, claim ROWS UNBOUNDED PRECEDING) AS last_end
	    FROM ev)
	SELECT (SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - claimed_at) * 1000) FROM t),
	       (SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM end_date - started_at) * 1000) FROM t),
	       (SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM at - last_end) * 1000)
	          FROM w WHERE claim AND last_end IS NOT NULL),
	       (SELECT extract(epoch FROM sum(end_date - claimed_at)) / nullif(extract(epoch FROM max(end_date) - min(claimed_at)), 0) FROM t)`

// liteStages prints stagesSQL's figures for a Lite burn-down over runs.
// With the mean of taken slots near agents × capacity, the TIs' own
// claim → end latency bounds the rate; well below it, slots sit free.
func (e *env) liteStages(ctx context.Context, conn *pgx.Conn, runs []int64) error {
	var claimStart, startEnd, endClaim []float64
	var busy *float64
	if err := conn.QueryRow(ctx, stagesSQL, runs).Scan(&claimStart, &startEnd, &endClaim, &busy); err != nil {
		return fmt.Errorf("lite stages: %w", err)
	}
	for _, s := range []struct {
		key, label string
		v          []float64
	}{
		{"lite_claim_start", "lite claim → start", claimStart},
		{"lite_start_end", "lite start → end (completion committed)", startEnd},
		{"lite_end_claim", "lite end → next claim on the agent", endClaim},
	} {
		if len(s.v) != 2 {
			e.out.missing(s.label+" p50", "no successful TI to measure")
			continue
		}
		e.out.figure(s.key+"_p50", s.label+" p50", s.v[0], "ms", "database clock")
		e.out.figure(s.key+"_p99", s.label+" p99", s.v[1], "ms", "")
	}
	if busy != nil {
		e.out.figure("lite_busy", "lite slots taken, mean", *busy, "slots",
			fmt.Sprintf("of %d: claim → end summed over the burn-down's span", e.cfg.LiteAgents*e.cfg.LiteCapacity))
	}
	return nil
}

// unfinished prints, as comment lines, the TIs of runs that did not
// succeed, counted by state and reason, and up to three of them that are
// not terminal with their stamps: what a cut burn-down waited for.
func (e *env) unfinished(ctx context.Context, conn *pgx.Conn, phase string, runs []int64) error {
	rows, err := conn.Query(ctx, `
		SELECT state, coalesce(reason, ''), count(*) FROM task_instances
		 WHERE run_id = ANY($1) AND state <> 'success' GROUP BY 1, 2 ORDER BY 3 DESC`, runs)
	if err != nil {
		return fmt.Errorf("%s: unfinished TIs: %w", phase, err)
	}
	type group struct {
		State, Reason string
		N             int64
	}
	groups, err := pgx.CollectRows(rows, pgx.RowToStructByPos[group])
	if err != nil {
		return fmt.Errorf("%s: unfinished TIs: %w", phase, err)
	}
	for _, g := range groups {
		fmt.Fprintf(e.out.w, "# %s: %d TIs %s (reason %q)\n", phase, g.N, g.State, g.Reason)
	}
	if len(groups) == 0 {
		return nil
	}
	rows, err = conn.Query(ctx, `
		SELECT id, state, coalesce(agent_id, 0), try_number, coalesce(message, ''),
		       claimed_at, started_at, last_heartbeat_at, now()
		  FROM task_instances WHERE run_id = ANY($1) AND state <> ALL ($2) ORDER BY id LIMIT 3`, runs, terminalStates())
	if err != nil {
		return fmt.Errorf("%s: unfinished TIs: %w", phase, err)
	}
	type stuck struct {
		ID                          int64
		State                       string
		Agent                       int64
		Try                         int
		Message                     string
		Claimed, Started, Heartbeat *time.Time
		Now                         time.Time
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[stuck])
	if err != nil {
		return fmt.Errorf("%s: unfinished TIs: %w", phase, err)
	}
	ago := func(t *time.Time, now time.Time) string {
		if t == nil {
			return "never"
		}
		return now.Sub(*t).Round(time.Millisecond).String() + " ago"
	}
	for _, s := range list {
		fmt.Fprintf(e.out.w, "# %s: TI %d %s on agent %d, try %d, claimed %s, started %s, last heartbeat %s: %q\n",
			phase, s.ID, s.State, s.Agent, s.Try, ago(s.Claimed, s.Now), ago(s.Started, s.Now), ago(s.Heartbeat, s.Now), s.Message)
	}
	return nil
}

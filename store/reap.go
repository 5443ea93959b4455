package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/retry"
	"github.com/vigil-sched/vigil/state"
)

// The reapers' SQL (docs/design.md §6). Each List* query returns only candidates
// that carry a positive observable signal; each action is ONE conditional
// UPDATE whose WHERE re-checks that exact signal, so a heartbeat, claim or
// completion that commits first wins (River #1302). Comparisons use the
// caller's now (the database clock in production, a stepped clock in
// tests); stamps written use now().

// StaleRunning is an agent-lost candidate: a running TI whose last
// heartbeat (a claim counts as the first) is older than the threshold.
type StaleRunning struct {
	TIID, RunID      int64
	TaskID           string
	TryNumber        int
	AttemptID        string
	AgentID          *int64
	LastHeartbeatAt  time.Time
	Started          bool
	DispatchAttempts int
	Policy           retry.Policy
	Age              time.Duration // now − last_heartbeat_at
}

// ListStaleRunning lists up to limit running TIs with last_heartbeat_at
// older than now − threshold, stalest first. last_heartbeat_at is not
// indexed (heartbeats stay heap-only), so candidates are found through
// their agent: agents.oldest_heartbeat_at is no later than any running
// TI's stamp, and running TIs whose agent row was pruned have their own
// small index. With nothing stale it reads no task_instances row.
func (s *Store) ListStaleRunning(ctx context.Context, now time.Time, threshold time.Duration, limit int) ([]StaleRunning, error) {
	// Per stale agent, a LATERAL read of its running TIs through
	// ti_agent_idx: the planner cannot turn it into a scan of every live
	// TI, whatever it estimates for the cutoff.
	rows, err := s.pool.Query(ctx, `
		SELECT * FROM (
		  SELECT s.* FROM agents a CROSS JOIN LATERAL (`+runningColumns+`
		     WHERE t.agent_id = a.id AND t.state = 'running' AND t.attempt_id IS NOT NULL
		       AND t.last_heartbeat_at < $1::timestamptz - $2 * interval '1 microsecond'
		     ORDER BY t.last_heartbeat_at LIMIT $3) s
		   WHERE a.oldest_heartbeat_at < $1::timestamptz - $2 * interval '1 microsecond'
		  UNION ALL`+runningColumns+`
		   WHERE t.state = 'running' AND t.agent_id IS NULL AND t.attempt_id IS NOT NULL
		     AND t.last_heartbeat_at < $1::timestamptz - $2 * interval '1 microsecond') x
		 ORDER BY 7 LIMIT $3`, now, micros(threshold), limit)
	if err != nil {
		return nil, fmt.Errorf("list stale running: %w", err)
	}
	return collectRunning(rows)
}

// runningColumns selects what scanRunning reads from task_instances t; $1
// is "now".
const runningColumns = `
		SELECT t.id, t.run_id, t.task_id, t.try_number, t.attempt_id::text, t.agent_id, t.last_heartbeat_at,
		       t.started_at IS NOT NULL, t.dispatch_attempts, t.retries + t.retry_base,
		       (extract(epoch FROM t.retry_delay) * 1e6)::bigint, t.retry_exponential,
		       (extract(epoch FROM t.max_retry_delay) * 1e6)::bigint,
		       (extract(epoch FROM $1::timestamptz - t.last_heartbeat_at) * 1e6)::bigint
		  FROM task_instances t`

func collectRunning(rows pgx.Rows) ([]StaleRunning, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (StaleRunning, error) {
		var c StaleRunning
		var delay, maxDelay, age int64
		err := r.Scan(&c.TIID, &c.RunID, &c.TaskID, &c.TryNumber, &c.AttemptID, &c.AgentID, &c.LastHeartbeatAt,
			&c.Started, &c.DispatchAttempts, &c.Policy.Retries, &delay, &c.Policy.Exponential, &maxDelay, &age)
		c.Policy.Delay, c.Policy.MaxDelay, c.Age = fromMicros(delay), fromMicros(maxDelay), fromMicros(age)
		return c, err
	})
}

// Stamp columns a Reap may be guarded by.
const (
	StampHeartbeat = "last_heartbeat_at" // running: agent-lost
	StampQueued    = "queued_at"         // queued: dispatch-lost
	StampStarted   = "started_at"        // running: execution-timeout backstop
)

// Reap is one guarded TI transition decided by a reaper.
type Reap struct {
	TIID        int64
	RunID       int64
	TaskID      string
	TryNumber   int
	AttemptID   string
	AgentID     *int64
	State       state.TI        // new state: failed | up_for_retry | scheduled
	Reason      state.Reason    // agent_lost | dispatch_lost | execution_timeout ...
	Message     string          // human text, also the event message
	RetryDelay  time.Duration   // up_for_retry only
	Requeue     bool            // never-started requeue: try_number−1, dispatch_attempts+1
	EventKind   state.EventKind // the decision, also counted as its metrics label
	WhereState  state.TI        // signal: the state it was listed in
	WhereStamp  time.Time       // signal: the stamp's value when listed
	StampColumn string          // one of StampHeartbeat, StampQueued, StampStarted
	// NoCoverSince, when set, also re-checks that no active agent that
	// heartbeated after it offers every required tag (dispatch-lost).
	NoCoverSince time.Time
}

// ApplyReap performs r as one fenced, conditional UPDATE plus its event.
// It reports false when the signal no longer holds (a heartbeat, claim or
// completion won the race): nothing is written then.
func (s *Store) ApplyReap(ctx context.Context, epoch int64, r Reap) (bool, error) {
	landed, err := s.ApplyReaps(ctx, epoch, []Reap{r})
	if err != nil {
		return false, fmt.Errorf("reap task instance %d (%s): %w", r.TIID, r.EventKind, err)
	}
	return len(landed) == 1, nil
}

// ApplyReaps performs a batch of guarded transitions in one fenced
// statement that unnests them, re-checks each row's signal (state, stamp,
// attempt and, for dispatch-lost, tag cover) in its WHERE, and writes an
// event and a scheduler mark for every row that changed. It returns the
// reaps that landed; the rest lost a race to a heartbeat, claim or
// completion and wrote nothing (River's JobSetStateIfRunningMany shape,
// without the id-only gap of its rescuer).
func (s *Store) ApplyReaps(ctx context.Context, epoch int64, reaps []Reap) ([]Reap, error) {
	var landed []Reap
	err := s.LeaderTx(ctx, epoch, func(tx Tx) error {
		var err error
		landed, err = applyReapsTx(ctx, tx, reaps)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reap %d task instance(s): %w", len(reaps), err)
	}
	return landed, nil
}

// applyReapsSQL is ApplyReaps' statement; its parameters are parallel
// arrays, one element per Reap.
const applyReapsSQL = `
	WITH i AS (
	  SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bool[],
	                       $7::text[], $8::timestamptz[], $9::text[], $10::text[], $11::timestamptz[],
	                       $12::int[], $13::bigint[], $14::text[])
	    AS i(ti_id, state, reason, message, delay_us, requeue, where_state, where_stamp, stamp_col,
	         attempt_id, no_cover_since, try_number, agent_id, kind)),
	u AS (
	  UPDATE task_instances t
	     SET state = i.state, reason = i.reason, message = i.message,
	         end_date = CASE WHEN i.state = 'failed' THEN now() END,
	         next_retry_at = CASE WHEN i.state = 'up_for_retry' THEN now() + i.delay_us * interval '1 microsecond' END,
	         try_number = CASE WHEN i.requeue THEN greatest(t.try_number - 1, 0) ELSE t.try_number END,
	         dispatch_attempts = CASE WHEN i.requeue THEN t.dispatch_attempts + 1 ELSE t.dispatch_attempts END,
	         queued_at = CASE WHEN i.requeue THEN NULL ELSE t.queued_at END,
	         updated_at = now()
	    FROM i
	   WHERE t.id = i.ti_id AND t.state = i.where_state
	     AND CASE i.stamp_col WHEN 'last_heartbeat_at' THEN t.last_heartbeat_at = i.where_stamp
	                          WHEN 'queued_at' THEN t.queued_at = i.where_stamp
	                          WHEN 'started_at' THEN t.started_at = i.where_stamp END
	     AND (i.attempt_id = '' OR t.attempt_id = nullif(i.attempt_id, '')::uuid)
	     AND (i.no_cover_since IS NULL OR NOT EXISTS (
	           SELECT 1 FROM agents a WHERE a.state = 'active' AND a.last_heartbeat_at > i.no_cover_since
	              AND t.required_tags <@ a.tags))
	  RETURNING t.id, t.run_id),
	ev AS (
	  INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
	  SELECT u.run_id, u.id, t.task_id, i.try_number, nullif(i.attempt_id, '')::uuid, i.agent_id, i.kind, i.message
	    FROM u JOIN i ON i.ti_id = u.id JOIN task_instances t ON t.id = u.id),
	d AS (INSERT INTO run_dirty (run_id) SELECT DISTINCT run_id FROM u)
	SELECT id FROM u`

// applyReapsTx is ApplyReaps inside tx.
func applyReapsTx(ctx context.Context, tx Tx, reaps []Reap) ([]Reap, error) {
	if len(reaps) == 0 {
		return nil, nil
	}
	n := len(reaps)
	ids, delays, tries, agents := make([]int64, n), make([]int64, n), make([]int32, n), make([]*int64, n)
	states, reasons, msgs, whereStates, cols, attempts, kinds :=
		make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	requeue, stamps, cover := make([]bool, n), make([]time.Time, n), make([]*time.Time, n)
	byID := make(map[int64]Reap, n)
	for i, r := range reaps {
		switch r.StampColumn {
		case StampHeartbeat, StampQueued, StampStarted:
		default:
			return nil, fmt.Errorf("apply reap: stamp column %q is not allowed", r.StampColumn)
		}
		if err := checkMove(r.WhereState, r.State, state.ActorReaper); err != nil {
			return nil, fmt.Errorf("apply reap of task instance %d: %w", r.TIID, err)
		}
		ids[i], states[i], reasons[i], msgs[i] = r.TIID, string(r.State), string(r.Reason), r.Message
		delays[i], requeue[i] = micros(r.RetryDelay), r.Requeue
		whereStates[i], stamps[i], cols[i], attempts[i] = string(r.WhereState), r.WhereStamp, r.StampColumn, r.AttemptID
		tries[i], agents[i], kinds[i] = int32(r.TryNumber), r.AgentID, string(r.EventKind)
		if !r.NoCoverSince.IsZero() {
			cover[i] = &reaps[i].NoCoverSince
		}
		byID[r.TIID] = r
	}
	rows, err := tx.Query(ctx, applyReapsSQL, ids, states, reasons, msgs, delays, requeue, whereStates, stamps,
		cols, attempts, cover, tries, agents, kinds)
	if err != nil {
		return nil, err
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	landed := make([]Reap, 0, len(got))
	for _, id := range got {
		landed = append(landed, byID[id])
	}
	return landed, nil
}

// StaleQueued is a dispatch-lost candidate: a queued TI whose queued_at is
// set and older than the threshold. Covered tells whether an active agent
// (heartbeat within the agent-lost threshold) offers every required tag;
// Missing lists required tags no active agent offers at all.
type StaleQueued struct {
	TIID, RunID  int64
	TaskID       string
	TryNumber    int
	QueuedAt     time.Time
	RequiredTags []string
	// Pool is the TI's task pool, "" for none.
	Pool         string
	Covered      bool
	Missing      []string
	ActiveAgents int
	Age          time.Duration
}

// ListStaleQueued lists up to limit queued TIs with queued_at older than
// now − threshold whose tag coverage by agents active since
// now − activeWindow equals covered, oldest first. It walks ti_queued_idx
// in (queued_at, id) keyset pages and filters coverage page by page, so an
// uncoverable TI is listed (covered false) however large the covered
// backlog queued ahead of it; the walk reads only queued TIs past the
// threshold, never the history or the rest of the live work.
func (s *Store) ListStaleQueued(ctx context.Context, now time.Time, threshold, activeWindow time.Duration, limit int, covered bool) ([]StaleQueued, error) {
	var out []StaleQueued
	err := s.walkStaleQueued(ctx, now, threshold, activeWindow, func(page []StaleQueued) bool {
		for _, c := range page {
			if c.Covered == covered && len(out) < limit {
				out = append(out, c)
			}
		}
		return len(out) < limit
	})
	if err != nil {
		return nil, fmt.Errorf("list stale queued: %w", err)
	}
	return out, nil
}

// PoolBacklog is the stale queued TIs of one task pool ("" for the TIs
// of no pool) that StaleBacklog counted, and the oldest queued_at among
// them.
type PoolBacklog struct {
	Pool   string
	Count  int
	Oldest time.Time
}

// StaleBacklog counts, per task pool, the queued TIs with queued_at older
// than now − threshold that an agent active since now − activeWindow
// could run (its tags cover theirs): work waiting for busy agents or for
// a slot of its pool, which the dispatch-lost reaper leaves alone. It
// returns the pools with a backlog, by name, each with its oldest
// queued_at. It walks at most backlogCountCap stale queued TIs, so the
// counts saturate there, and writes nothing.
func (s *Store) StaleBacklog(ctx context.Context, now time.Time, threshold, activeWindow time.Duration) ([]PoolBacklog, error) {
	var walked int
	byPool := map[string]*PoolBacklog{}
	err := s.walkStaleQueued(ctx, now, threshold, activeWindow, func(page []StaleQueued) bool {
		for _, c := range page {
			if !c.Covered {
				continue
			}
			b := byPool[c.Pool]
			if b == nil { // pages come oldest first: the first is the oldest
				b = &PoolBacklog{Pool: c.Pool, Oldest: c.QueuedAt}
				byPool[c.Pool] = b
			}
			b.Count++
		}
		walked += len(page)
		return walked < backlogCountCap
	})
	if err != nil {
		return nil, fmt.Errorf("count stale queued backlog: %w", err)
	}
	out := make([]PoolBacklog, 0, len(byPool))
	for _, b := range byPool {
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b PoolBacklog) int { return strings.Compare(a.Pool, b.Pool) })
	return out, nil
}

// backlogCountCap bounds the stale queued TIs StaleBacklog walks per pass.
const backlogCountCap = 10000

// staleQueuedPage is how many stale queued TIs one keyset page walks. It
// is small on purpose: with a LIMIT well under the matching rows the
// planner walks ti_queued_idx in order instead of reading every live TI
// through ti_live_idx and sorting (the scan-proof test checks it).
const staleQueuedPage = 100

// walkStaleQueued calls visit with successive pages of stale queued TIs,
// oldest first, each with its tag coverage, until a page is short or
// visit returns false.
func (s *Store) walkStaleQueued(ctx context.Context, now time.Time, threshold, activeWindow time.Duration,
	visit func([]StaleQueued) bool) error {
	var afterAt time.Time // zero: from the oldest
	var afterID int64
	for {
		rows, err := s.pool.Query(ctx, `
			WITH `+liveAgentsCTE+`,
			walk AS MATERIALIZED (
			  SELECT q.id FROM task_instances q
			   WHERE q.state = 'queued' AND q.queued_at < $1::timestamptz - $2 * interval '1 microsecond'
			     AND (q.queued_at, q.id) > ($4::timestamptz, $5::bigint)
			   ORDER BY q.queued_at, q.id LIMIT $6)
			`+queuedColumns+`
			  FROM walk JOIN task_instances t ON t.id = walk.id
			 ORDER BY t.queued_at, t.id`,
			now, micros(threshold), micros(activeWindow), afterAt, afterID, staleQueuedPage)
		if err != nil {
			return err
		}
		page, err := collectQueued(rows)
		if err != nil {
			return err
		}
		if !visit(page) || len(page) < staleQueuedPage {
			return nil
		}
		afterAt, afterID = page[len(page)-1].QueuedAt, page[len(page)-1].TIID
	}
}

// liveAgentsCTE is the CTE live: the tags of every agent active since
// $1 (now) − $3 (microseconds), the agents that can take queued work.
const liveAgentsCTE = `live AS MATERIALIZED (
			  SELECT tags FROM agents
			   WHERE state = 'active' AND last_heartbeat_at > $1::timestamptz - $3 * interval '1 microsecond')`

// queuedColumns selects what collectQueued reads of task_instances t: its
// coverage by the CTE live (liveAgentsCTE) and its age at $1 (now).
const queuedColumns = `SELECT t.id, t.run_id, t.task_id, t.try_number, t.queued_at, t.required_tags, t.pool,
			       EXISTS (SELECT 1 FROM live WHERE t.required_tags <@ live.tags),
			       coalesce((SELECT array_agg(tag ORDER BY tag) FROM unnest(t.required_tags) tag
			                  WHERE NOT EXISTS (SELECT 1 FROM live WHERE tag = ANY (live.tags))), '{}'),
			       (SELECT count(*) FROM live),
			       (extract(epoch FROM $1::timestamptz - t.queued_at) * 1e6)::bigint`

func collectQueued(rows pgx.Rows) ([]StaleQueued, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (StaleQueued, error) {
		var c StaleQueued
		var age int64
		err := r.Scan(&c.TIID, &c.RunID, &c.TaskID, &c.TryNumber, &c.QueuedAt, &c.RequiredTags, &c.Pool, &c.Covered,
			&c.Missing, &c.ActiveAgents, &age)
		c.Age = fromMicros(age)
		return c, err
	})
}

// OrphanRun is an orphan-run candidate: a running run with no TI in
// scheduled, queued, running or up_for_retry, unchanged (run and TIs)
// since LastChange, older than the threshold. AllTerminal/AllOK classify
// how it will be finalized.
type OrphanRun struct {
	RunID       int64
	DAGID       string
	LastChange  time.Time
	AllTerminal bool
	AllOK       bool
	Pending     int // TIs still none
	Age         time.Duration
}

// orphanSignalSQL selects running runs with no active TI and their last
// change, among those the WHERE it is completed with picks (%s); shared by
// list and action.
var orphanSignalSQL = `
	SELECT r.id, r.dag_id,
	       greatest(r.updated_at, max(t.updated_at)) AS last_change,
	       bool_and(t.state IN ` + tiTerminalSQL + `) AS all_terminal,
	       bool_and(t.state IN ` + tiDoneSQL + `) AS all_ok,
	       count(*) FILTER (WHERE t.state = 'none') AS pending,
	       r.updated_at AS run_updated
	  FROM runs r JOIN task_instances t ON t.run_id = r.id
	 WHERE r.state = 'running' AND %s
	 GROUP BY r.id
	HAVING bool_and(t.state NOT IN ` + tiActiveSQL + `)`

// ListOrphanRuns lists up to limit orphan-run candidates whose last change
// is older than now − threshold.
func (s *Store) ListOrphanRuns(ctx context.Context, now time.Time, threshold time.Duration, limit int) ([]OrphanRun, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT o.id, o.dag_id, o.last_change, o.all_terminal, o.all_ok, o.pending,
		       (extract(epoch FROM $1::timestamptz - o.last_change) * 1e6)::bigint
		  FROM (`+fmt.Sprintf(orphanSignalSQL, "r.idle_since < $1::timestamptz - $2 * interval '1 microsecond'")+`) o
		 WHERE o.last_change < $1::timestamptz - $2 * interval '1 microsecond'
		 ORDER BY o.last_change LIMIT $3`, now, micros(threshold), limit)
	if err != nil {
		return nil, fmt.Errorf("list orphan runs: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (OrphanRun, error) {
		var c OrphanRun
		var age int64
		err := r.Scan(&c.RunID, &c.DAGID, &c.LastChange, &c.AllTerminal, &c.AllOK, &c.Pending, &age)
		c.Age = fromMicros(age)
		return c, err
	})
}

// FinalizeOrphan ends an orphan run in one statement, re-checking in its
// WHERE that the run is still running, has no active TI and has not
// changed since c.LastChange. A run whose TIs are all terminal is
// finalized the normal way (success, or failed with the first failed TI's
// reason); otherwise its 'none' TIs fail with reason orphaned and the run
// fails with reason orphaned. It returns the run's new state, or "" when
// the signal no longer held.
func (s *Store) FinalizeOrphan(ctx context.Context, epoch int64, c OrphanRun, message string) (state.Run, error) {
	var ended state.Run
	err := s.LeaderTx(ctx, epoch, func(tx Tx) error {
		// The run row first: the order the scheduler's pass takes.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM runs WHERE id = $1 FOR NO KEY UPDATE`, c.RunID); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `
			WITH chk AS (
			  SELECT o.id, o.all_terminal, o.all_ok, o.run_updated FROM (`+fmt.Sprintf(orphanSignalSQL, "r.id = $1")+`) o
			   WHERE o.last_change = $2),
			culprit AS (
			  SELECT t.task_id, t.state, t.reason FROM task_instances t JOIN chk ON chk.id = t.run_id
			   WHERE t.state IN `+tiCulpritSQL+` ORDER BY t.end_date NULLS LAST, t.ordinal LIMIT 1),
			tis AS (
			  UPDATE task_instances t
			     SET state = `+moveOrphaned.To()+`, reason = 'orphaned', message = $3, end_date = now(), updated_at = now()
			    FROM chk WHERE t.run_id = chk.id AND t.state IN `+moveOrphaned.From()+` AND NOT chk.all_terminal
			  RETURNING t.id, t.run_id, t.task_id, t.try_number),
			tiev AS (
			  INSERT INTO events (run_id, ti_id, task_id, try_number, kind, message)
			  SELECT run_id, id, task_id, try_number, 'ti_failed', $3 FROM tis),
			upd AS (
			  UPDATE runs r
			     SET state = CASE WHEN chk.all_ok THEN 'success' ELSE 'failed' END,
			         reason = CASE WHEN chk.all_ok THEN NULL
			                       WHEN chk.all_terminal THEN coalesce((SELECT reason FROM culprit), 'upstream_failed')
			                       ELSE 'orphaned' END,
			         message = $3, end_date = now(), updated_at = now(), idle_since = NULL
			    FROM chk WHERE r.id = chk.id AND r.state = 'running' AND r.updated_at = chk.run_updated
			  RETURNING r.id, r.state)
			SELECT coalesce((SELECT state FROM upd), '')`, c.RunID, c.LastChange, message).Scan(&ended)
		if err != nil || ended == "" {
			return err
		}
		kind := state.EventOrphanReaped
		if c.AllTerminal {
			kind = state.EventOrphanFinalized
		}
		_, err = tx.Exec(ctx, `INSERT INTO events (run_id, kind, message) VALUES ($1, $2, $3)`,
			c.RunID, kind, message+" (run "+string(ended)+")")
		return err
	})
	if err != nil {
		return "", fmt.Errorf("finalize orphan run %d: %w", c.RunID, err)
	}
	return ended, nil
}

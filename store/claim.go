package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/vigil-sched/vigil/dag"
)

// queuedTagSetsSQL enumerates the distinct (required_tags, pool) groups
// of the queued TIs with one probe of ti_queued_tags_idx each (a loose
// index scan), so a claim costs one index seek per distinct group plus
// the rows it takes, however deep the queue of work it cannot take
// (docs/design.md §4 claim; adr/0018). It is the head of a WITH RECURSIVE
// list and defines sets(tags, pool, prio, queued_at, id): each group with
// the key of its first queued TI in claim order (prio is
// -priority_weight, so the highest weight sorts first, then the oldest),
// the first entry of the group's run in the index that the snapshot sees.
// Every queued TI of the group the snapshot sees sorts at or after that
// key, so a claim seeks its candidates from there rather than from the
// front of the run, past the entries of TIs claimed since the last vacuum
// (adr/0018, amendment).
const queuedTagSetsSQL = `
	sets(tags, pool, prio, queued_at, id) AS (
	  (SELECT required_tags, pool, -priority_weight, queued_at, id FROM task_instances WHERE state = 'queued'
	    ORDER BY required_tags, pool, -priority_weight, queued_at, id LIMIT 1)
	  UNION ALL
	  SELECT n.* FROM sets s CROSS JOIN LATERAL (
	    SELECT t.required_tags, t.pool, -t.priority_weight, t.queued_at, t.id FROM task_instances t
	     WHERE t.state = 'queued' AND (t.required_tags, t.pool) > (s.tags, s.pool)
	     ORDER BY t.required_tags, t.pool, -t.priority_weight, t.queued_at, t.id LIMIT 1) n)`

// poolHasRoom is the SQL condition that the pool named by the
// expression pool is none (”) or had a free slot as the statement's
// snapshot saw it, read without a lock (occupied minus the releases not
// yet folded, below slots). A claim locks only such pools, so a claim
// whose every group waits on a full pool stays read-only; a slot freed
// after the snapshot wakes the long-poll (trigger ti_pool_release
// notifies ChanQueued) for the next round. A pool that does not exist
// has no room.
func poolHasRoom(pool string) string {
	return `(` + pool + ` = '' OR EXISTS (
		  SELECT 1 FROM task_pools p WHERE p.name = ` + pool + `
		     AND p.slots > p.occupied - (SELECT count(*) FROM task_pool_releases r WHERE r.pool = p.name)))`
}

// claimableSQL is Claimable's statement ($1 the agent).
var claimableSQL = `
		WITH RECURSIVE ` + queuedTagSetsSQL + `
		SELECT a.tags,
		       a.capacity - (SELECT count(*) FROM task_instances WHERE agent_id = a.id AND state = 'running'),
		       EXISTS (SELECT 1 FROM sets s WHERE s.tags <@ a.tags AND ` + poolHasRoom("s.pool") + `)
		  FROM agents a WHERE a.id = $1 AND a.state <> 'deregistered'`

// Claimability is what a claim long-poll reads before it claims: the
// agent's tags, its free capacity, and whether a queued TI it could take
// exists. Reading it writes nothing.
type Claimability struct {
	Tags []string
	// Room is capacity minus the agent's running TIs; ≤ 0 means full.
	Room int
	// Queued is true when some queued TI's required_tags are a subset of
	// Tags and it names no pool or a pool with a free slot.
	Queued bool
}

// Claimable reads agentID's Claimability in one read-only statement, so
// that an idle claim long-poll costs no write (docs/design.md §4 claim).
// Errors: ErrNotFound when the agent is unknown or deregistered.
func (s *Store) Claimable(ctx context.Context, agentID int64) (Claimability, error) {
	var c Claimability
	err := s.pool.QueryRow(ctx, claimableSQL, agentID).Scan(&c.Tags, &c.Room, &c.Queued)
	if errNoRows(err) {
		return c, fmt.Errorf("agent %d: %w", agentID, ErrNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("claimable for agent %d: %w", agentID, err)
	}
	return c, nil
}

// TagsFit reports whether a TI requiring required may run on an agent
// with tags (required ⊆ tags), the rule of the claim (required_tags <@
// tags) in Go: the claim long-poll uses it to decide which waiting
// agents a queue notification concerns.
func TagsFit(required, tags []string) bool {
	for _, r := range required {
		if !slices.Contains(tags, r) {
			return false
		}
	}
	return true
}

// Claim hands agentID up to min(slots, capacity − running) queued TIs its
// tags cover, highest priority_weight first, then oldest, never more of a
// pool's TIs than the pool has free slots (SKIP LOCKED: no two claims
// share one; docs/pools.md), each to
// running with a fresh attempt_id, as its first heartbeat (docs/design.md
// §4). Errors: ErrNotFound for an unknown or deregistered agent.
func (s *Store) Claim(ctx context.Context, agentID int64, slots int) ([]ClaimedTask, error) {
	_, tasks, err := s.LookAndClaim(ctx, agentID, slots)
	return tasks, err
}

// LookAndClaim is Claim that also reports the agent's Claimability as
// the claim's own statement read it, before it took anything: the claim
// long-poll's one statement per round, where Claimable then Claim walked
// the queued tag sets twice (adr/0018, amendment). With nothing to take
// it writes nothing, like Claimable. Errors: as Claim.
func (s *Store) LookAndClaim(ctx context.Context, agentID int64, slots int) (Claimability, []ClaimedTask, error) {
	var c Claimability
	rows, err := s.pool.Query(ctx, claimSQL, agentID, slots)
	if err != nil {
		return c, nil, fmt.Errorf("claim for agent %d: %w", agentID, err)
	}
	defer rows.Close()
	var tasks []ClaimedTask
	agentOK := false
	for rows.Next() {
		t, err := scanClaimed(rows, &c)
		if err != nil {
			return c, nil, fmt.Errorf("claim for agent %d: %w", agentID, err)
		}
		agentOK = true
		if t != nil {
			tasks = append(tasks, *t)
		}
	}
	if err := rows.Err(); err != nil {
		return c, nil, fmt.Errorf("claim for agent %d: %w", agentID, err)
	}
	if !agentOK {
		return c, nil, fmt.Errorf("agent %d: %w", agentID, ErrNotFound)
	}
	return c, tasks, nil
}

// claimSQL is Claim's statement ($1 the agent, $2 the slots asked for).
// Candidates are found by group, a distinct (required_tags, pool): for
// each group the agent's tags cover (fit) whose pool is none or had room
// (roomy), its first entries in claim order (highest priority_weight,
// then oldest) are locked FOR UPDATE SKIP LOCKED, up to the room asked
// for and the pool's free slots; then the first of those in claim order
// are taken, at most a pool's free slots from one pool across its
// groups (pick); entries locked but not taken are released at commit.
//
// The pools are locked (pl, FOR NO KEY UPDATE, in name order so that two
// claims never wait on each other in a cycle) before any candidate: the
// locked row is the newest version, after every claim that committed
// while this one waited, so occupied counts each TI they took although
// this statement's snapshot is older. The releases this claim folds are
// those it deletes (rel): a release another claim folded first is gone
// and not counted twice. Free slots are slots − (occupied − folded),
// never below 0, and pupd writes occupied − folded + taken. No statement
// but a claim writes a pool row, and no claim waits on anything while it
// holds one but the agent row, which no other writer holds while it
// waits on a pool: the claim cannot deadlock (docs/pools.md).
//
// claimed_at is the clock when the update runs, after the statement's
// snapshot, not the transaction's start (now()): a TI's claimed_at is
// then later than the commit of the completion that freed its slot,
// whose end_date is at most that commit, so the recorded spans of a
// pool's TIs show its limit held (e2e TestProPoolOfOneAcrossLeaderKill).
// The claim is the TI's first heartbeat, so last_heartbeat_at takes the
// same reading (one uncorrelated subquery: an InitPlan, evaluated when the
// first claimed row is written, after the locks).
//
// It reads the agent (a) and locks the candidates (cand) before any
// write; the agent row and the TIs are written only when pick holds a
// TI, so an empty claim is read-only unless a pool looked free. The TIs
// are written only through the agent row's own update (upd reads ag):
// agent_id has no foreign key (adr/0027), and a claim whose snapshot
// still saw an agent that retention deleted meanwhile finds no row to
// update, so it takes nothing rather than naming a missing agent. fit is
// materialized so that no plan can lock entries of a group the agent
// cannot take before filtering.
// Its first row: the agent's tags, room and whether work it could take
// is queued, then one row per claimed TI (or one with NULLs).
var claimSQL = `
		WITH RECURSIVE ` + queuedTagSetsSQL + `,
		a AS MATERIALIZED (
		  SELECT a.tags, a.capacity - (SELECT count(*) FROM task_instances
		                                WHERE agent_id = a.id AND state = 'running') AS room
		    FROM agents a WHERE a.id = $1 AND a.state <> 'deregistered'),
		lim AS MATERIALIZED (
		  SELECT greatest(0, least($2::int, room))::int AS n FROM a),
		fit AS MATERIALIZED (
		  SELECT s.* FROM sets s, a WHERE s.tags <@ a.tags),
		roomy AS MATERIALIZED (
		  SELECT f.* FROM fit f WHERE ` + poolHasRoom("f.pool") + `),
		pl AS MATERIALIZED (
		  SELECT p.name, p.slots, p.occupied FROM task_pools p
		   WHERE p.name IN (SELECT pool FROM roomy WHERE pool <> '') AND (SELECT n FROM lim) > 0
		   ORDER BY p.name FOR NO KEY UPDATE),
		rel AS (
		  DELETE FROM task_pool_releases r USING pl WHERE r.pool = pl.name RETURNING r.pool),
		free AS MATERIALIZED (
		  SELECT pl.name, greatest(0, pl.slots - pl.occupied + (SELECT count(*) FROM rel WHERE rel.pool = pl.name))::int AS n
		    FROM pl),
		cand AS MATERIALIZED (
		  SELECT c.* FROM roomy s
		   CROSS JOIN LATERAL (
		     SELECT t.id, t.pool, -t.priority_weight AS prio, t.queued_at FROM task_instances t
		      WHERE t.state = 'queued' AND (t.required_tags, t.pool) <= (s.tags, s.pool)
		        AND (t.required_tags, t.pool, -t.priority_weight, t.queued_at, t.id) >= (s.tags, s.pool, s.prio, s.queued_at, s.id)
		      ORDER BY t.required_tags, t.pool, -t.priority_weight, t.queued_at, t.id
		      LIMIT (SELECT least(lim.n, CASE WHEN s.pool = '' THEN lim.n
		                                      ELSE coalesce((SELECT n FROM free WHERE free.name = s.pool), 0) END) FROM lim)
		      FOR UPDATE OF t SKIP LOCKED) c),
		pick AS MATERIALIZED (
		  SELECT r.id, r.pool FROM (
		    SELECT c.*, row_number() OVER (PARTITION BY c.pool ORDER BY c.prio, c.queued_at, c.id) AS k FROM cand c) r
		   WHERE r.pool = '' OR r.k <= (SELECT n FROM free WHERE free.name = r.pool)
		   ORDER BY r.prio, r.queued_at, r.id
		   LIMIT (SELECT n FROM lim)),
		ag AS (
		  UPDATE agents SET last_heartbeat_at = now(), state = 'active',
		         oldest_heartbeat_at = coalesce(oldest_heartbeat_at, now())
		   WHERE id = $1 AND state <> 'deregistered' AND EXISTS (SELECT 1 FROM pick)
		  RETURNING id),
		upd AS (
		  UPDATE task_instances t
		     SET state = ` + moveClaim.To() + `, attempt_id = gen_random_uuid(), try_number = t.try_number + 1,
		         agent_id = ag.id, (claimed_at, last_heartbeat_at) = (SELECT c, c FROM (SELECT clock_timestamp() AS c) ts),
		         started_at = NULL, timeout_at = NULL,
		         reason = NULL, message = NULL, exit_code = NULL, end_date = NULL, updated_at = now()
		    FROM pick, ag WHERE t.id = pick.id AND t.state IN ` + moveClaim.From() + `
		  RETURNING t.*),
		pupd AS (
		  UPDATE task_pools p
		     SET occupied = p.occupied - (SELECT count(*) FROM rel WHERE rel.pool = p.name)
		                               + (SELECT count(*) FROM upd WHERE upd.pool = p.name)
		    FROM pl WHERE p.name = pl.name),
		ev AS (
		  INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
		  SELECT run_id, id, task_id, try_number, attempt_id, agent_id, 'ti_claimed',
		         format('try %s claimed by agent %s', try_number, agent_id) FROM upd)
		SELECT a.tags, a.room, EXISTS (SELECT 1 FROM roomy), u.id, u.attempt_id::text, u.run_id, u.dag_id, u.task_id,
		       u.try_number, u.command, u.env, coalesce((extract(epoch FROM u.execution_timeout) * 1e6)::bigint, 0),
		       r.run_type, r.logical_date, r.data_interval_start, r.data_interval_end, r.conf, u.run_as_user,
		       cardinality(u.upstream) > 0
		  FROM a LEFT JOIN upd u ON true LEFT JOIN runs r ON r.id = u.run_id`

// splitEnv reads a TI's stored env into t: plain values into Env, secret
// references into SecretRefs (the caller resolves them; the store never
// holds a value in the clear).
func splitEnv(env []byte, t *ClaimedTask) error {
	if len(env) == 0 {
		return nil
	}
	var all map[string]dag.EnvValue
	if err := json.Unmarshal(env, &all); err != nil {
		return err
	}
	for k, v := range all {
		if v.Secret != "" {
			if t.SecretRefs == nil {
				t.SecretRefs = map[string]string{}
			}
			t.SecretRefs[k] = v.Secret
			continue
		}
		if t.Env == nil {
			t.Env = map[string]string{}
		}
		t.Env[k] = v.Value
	}
	return nil
}

// scanClaimed reads one row of claimSQL's result into c (the agent's
// Claimability) and returns the claimed TI, or nil for the row of an
// empty claim.
func scanClaimed(rows interface{ Scan(...any) error }, c *Claimability) (*ClaimedTask, error) {
	var id *int64
	var t ClaimedTask
	var attempt, dagID, taskID *string
	var runID *int64
	var try *int
	var env []byte
	var execUS *int64
	var runType *string
	var conf []byte
	var runAs *string
	var hasUp *bool
	if err := rows.Scan(&c.Tags, &c.Room, &c.Queued, &id, &attempt, &runID, &dagID, &taskID, &try, &t.Command, &env, &execUS,
		&runType, &t.LogicalDate, &t.IntervalStart, &t.IntervalEnd, &conf, &runAs, &hasUp); err != nil {
		return nil, err
	}
	if id == nil {
		return nil, nil
	}
	t.TIID, t.AttemptID, t.RunID, t.DAGID, t.TaskID, t.TryNumber = *id, *attempt, *runID, *dagID, *taskID, *try
	t.ExecutionTimeout = fromMicros(*execUS)
	if runType != nil {
		t.RunType = *runType
	}
	if runAs != nil {
		t.RunAsUser = *runAs
	}
	t.HasUpstream = hasUp != nil && *hasUp
	var err error
	if t.Params, err = confParams(conf); err != nil {
		return nil, fmt.Errorf("run %d: conf: %w", t.RunID, err)
	}
	if err := splitEnv(env, &t); err != nil {
		return nil, fmt.Errorf("ti %d: env: %w", t.TIID, err)
	}
	return &t, nil
}

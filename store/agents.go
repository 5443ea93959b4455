package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
)

// RegisterAgent is Register for callers that drive the store directly
// (tests, benchmarks): it returns the agent id, the stop orders and the
// database clock, and drops the credential.
func (s *Store) RegisterAgent(ctx context.Context, req Registration) (int64, []StopOrder, time.Time, error) {
	r, err := s.Register(ctx, req)
	return r.AgentID, r.Stops, r.Now, err
}

// Registered is the outcome of Register.
type Registered struct {
	AgentID int64
	// Credential is the agent's secret in effect after the registration:
	// Registration.Credential when it matched the stored hash (the same
	// agent reconnecting), otherwise a new random one. Only its SHA-256 is
	// stored; the caller must hand it to the agent, which presents it on
	// every later request (CheckAgentCredential).
	Credential string
	Stops      []StopOrder // in-flight attempts the agent must terminate
	Now        time.Time   // the database clock
}

// NameInUseError is Register's refusal of a name held by another live
// registration: its heartbeat is younger than Registration.StaleAfter and
// the request did not present its credential. It unwraps to ErrConflict.
type NameInUseError struct {
	Name         string
	AgentID      int64         // the live holder
	HeartbeatAge time.Duration // since the holder's last heartbeat
	StaleAfter   time.Duration // the agent-lost threshold in force
}

// Error states the rule and the two ways out.
func (e *NameInUseError) Error() string {
	return fmt.Sprintf("agent name %q is held by live agent %d (last heartbeat %s ago, within the agent-lost threshold %s) "+
		"and this registration did not present its credential: give this agent another name, or wait until that registration is stale",
		e.Name, e.AgentID, e.HeartbeatAge.Round(time.Millisecond), e.StaleAfter)
}

// Unwrap makes errors.Is(err, ErrConflict) hold.
func (e *NameInUseError) Unwrap() error { return ErrConflict }

// credentialBytes is the size of a minted agent credential before hex
// encoding: 256 bits.
const credentialBytes = 32

// hashCredential is what the agents table stores of a credential.
func hashCredential(credential string) []byte {
	sum := sha256.Sum256([]byte(credential))
	return sum[:]
}

// Register registers an agent by name and reconciles the attempts it
// reports in flight (docs/design.md §4 register; KiCI in-flight reporting): the
// current ones are refreshed like a heartbeat, each with its own Started
// flag (an attempt whose process never started stays unstarted, so a
// reaper requeues it instead of spending a try), and the rest are returned
// as StopOrders.
//
// Identity: a name maps to one agent id. A registration may take the name
// when no row holds it (a new id), when it presents the credential of the
// row (the same agent reconnecting: the id and the credential are kept),
// or when the row is stale: deregistered, registered before credentials
// existed, or silent for at least req.StaleAfter (a restarted process: the
// id is kept, the credential replaced). Otherwise it fails with a
// *NameInUseError, and nothing changes. StaleAfter 0 treats every row as
// stale (store-level tests); the API passes the agent-lost threshold.
func (s *Store) Register(ctx context.Context, req Registration) (Registered, error) {
	raw := make([]byte, credentialBytes)
	if _, err := rand.Read(raw); err != nil {
		return Registered{}, fmt.Errorf("register agent %q: credential: %w", req.Name, err)
	}
	fresh := hex.EncodeToString(raw)
	var out Registered
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			INSERT INTO agents (name, tags, capacity, credential_hash) VALUES ($1, $2, $3, $4)
			ON CONFLICT (name) DO NOTHING RETURNING id`,
			req.Name, nonNil(req.Tags), req.Capacity, hashCredential(fresh)).Scan(&out.AgentID)
		if err == nil {
			out.Credential = fresh
			return nil
		}
		if !errNoRows(err) {
			return err
		}
		var st string
		var stored []byte
		var ageUS int64
		if err := tx.QueryRow(ctx, `
			SELECT id, state, credential_hash,
			       (extract(epoch FROM now() - last_heartbeat_at) * 1e6)::bigint
			  FROM agents WHERE name = $1 FOR UPDATE`, req.Name).Scan(&out.AgentID, &st, &stored, &ageUS); err != nil {
			return err
		}
		age := fromMicros(ageUS)
		switch {
		case req.Credential != "" && stored != nil && subtle.ConstantTimeCompare(hashCredential(req.Credential), stored) == 1:
			out.Credential = req.Credential
		case st == "deregistered" || stored == nil || age >= req.StaleAfter:
			out.Credential = fresh
		default:
			return &NameInUseError{Name: req.Name, AgentID: out.AgentID, HeartbeatAge: age, StaleAfter: req.StaleAfter}
		}
		_, err = tx.Exec(ctx, `
			UPDATE agents SET tags = $2, capacity = $3, state = 'active', last_heartbeat_at = now(), credential_hash = $4
			 WHERE id = $1`, out.AgentID, nonNil(req.Tags), req.Capacity, hashCredential(out.Credential))
		return err
	})
	if err != nil {
		var inUse *NameInUseError
		if errors.As(err, &inUse) {
			return Registered{}, err
		}
		return Registered{}, fmt.Errorf("register agent %q: %w", req.Name, err)
	}
	out.Stops, out.Now, err = s.Heartbeat(ctx, out.AgentID, req.InFlight)
	if err != nil {
		return Registered{}, fmt.Errorf("register agent %q: %w", req.Name, err)
	}
	return out, nil
}

// CheckAgentCredential verifies that credential is the one Register issued
// to agentID (compared by SHA-256, in constant time). Errors: ErrNotFound
// when the agent row does not exist (pruned: the agent must register
// again); ErrForbidden when the credential is empty or belongs to no, or
// another, registration of agentID: a different agent, or an old process
// whose name a restarted one took over.
func (s *Store) CheckAgentCredential(ctx context.Context, agentID int64, credential string) error {
	var stored []byte
	err := s.db(ctx).QueryRow(ctx, `SELECT credential_hash FROM agents WHERE id = $1`, agentID).Scan(&stored)
	if errNoRows(err) {
		return fmt.Errorf("agent %d: %w", agentID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("agent %d: check credential: %w", agentID, err)
	}
	if credential == "" || stored == nil || subtle.ConstantTimeCompare(hashCredential(credential), stored) != 1 {
		return fmt.Errorf("agent %d: the credential is not the one its registration issued: %w", agentID, ErrForbidden)
	}
	return nil
}

// Heartbeat refreshes the agent and every listed current attempt in one
// round trip and one transaction: last_heartbeat_at = now(), and
// started_at on the first report with Started. It returns the attempts the
// agent must stop and the database clock. Errors: ErrNotFound when the
// agent is unknown or deregistered (the agent must register again).
// docs/design.md §4 heartbeat.
//
// Two statements, sent as one pgx batch (one implicit transaction): the
// refresh, then agents.oldest_heartbeat_at recomputed as the minimum stamp
// of the agent's running TIs. The second statement sees the first's
// stamps, so the minimum needs no join with the listed attempts; in one
// statement it had to exclude them with an anti join, which the planner,
// estimating one running TI per agent, ran as a nested loop over the
// listed attempts: 1,000 × 1,000 comparisons, 67 of 78 ms of a 1,000-TI
// heartbeat (TestHeartbeatWorkIsLinearInItsAttempts).
func (s *Store) Heartbeat(ctx context.Context, agentID int64, entries []HeartbeatEntry) ([]StopOrder, time.Time, error) {
	ids := make([]int64, len(entries))
	attempts := make([]string, len(entries))
	started := make([]bool, len(entries))
	for i, e := range entries {
		ids[i], attempts[i], started[i] = e.TIID, e.AttemptID, e.Started
	}
	var agentOK bool
	var stale []byte
	var now time.Time
	batch := &pgx.Batch{}
	batch.Queue(heartbeatSQL, agentID, ids, attempts, started).QueryRow(func(row pgx.Row) error {
		return row.Scan(&agentOK, &stale, &now)
	})
	batch.Queue(heartbeatOldestSQL, agentID)
	err := s.db(ctx).SendBatch(ctx, batch).Close()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("heartbeat of agent %d: %w", agentID, err)
	}
	if !agentOK {
		return nil, now, fmt.Errorf("agent %d: %w", agentID, ErrNotFound)
	}
	var rows []struct {
		TIID      int64         `json:"ti_id"`
		AttemptID string        `json:"attempt_id"`
		State     *state.TI     `json:"state"`
		Current   *string       `json:"current"`
		Reason    *state.Reason `json:"reason"`
	}
	if err := json.Unmarshal(stale, &rows); err != nil {
		return nil, now, fmt.Errorf("heartbeat of agent %d: %w", agentID, err)
	}
	stops := make([]StopOrder, 0, len(rows))
	for _, r := range rows {
		stops = append(stops, StopOrder{
			Attempt: Attempt{TIID: r.TIID, AttemptID: r.AttemptID},
			Reason:  stopReason(deref(r.State), deref(r.Current), r.AttemptID, deref(r.Reason)),
		})
	}
	return stops, now, nil
}

// heartbeatSQL refreshes agent $1 and its listed attempts ($2 TI ids, $3
// attempt ids, $4 started flags), records first starts as ti_started
// events, and returns whether the agent is registered, the listed attempts
// that are not current (JSON) and now().
const heartbeatSQL = `
		WITH e AS (
		  SELECT * FROM unnest($2::bigint[], $3::uuid[], $4::bool[]) AS e(ti_id, attempt_id, started)),
		a AS (
		  UPDATE agents SET last_heartbeat_at = now(), state = 'active'
		   WHERE id = $1 AND state <> 'deregistered' RETURNING id),
		lk AS (
		  -- The rows are locked in id order, as a completion batch locks
		  -- them: an attempt whose completion is in flight is still listed
		  -- here, and two orders over the same rows deadlock. Found by
		  -- primary key, not by the agent's TIs: the planner expects one
		  -- running TI per agent and would loop over the listed ones for
		  -- each.
		  SELECT t.id FROM task_instances t
		   WHERE t.id = ANY ($2::bigint[]) AND t.agent_id = $1 AND t.state = 'running'
		   ORDER BY t.id FOR NO KEY UPDATE OF t),
		upd AS (
		  -- Only unindexed columns change here (timeout_at once, at the
		  -- start), so heartbeats are heap-only updates.
		  UPDATE task_instances t
		     SET last_heartbeat_at = now(),
		         started_at = CASE WHEN e.started THEN coalesce(t.started_at, now()) ELSE t.started_at END,
		         timeout_at = CASE WHEN e.started AND t.started_at IS NULL THEN now() + t.execution_timeout
		                           ELSE t.timeout_at END
		    FROM lk, e, a
		   WHERE t.id = lk.id AND t.id = e.ti_id AND t.attempt_id = e.attempt_id AND t.agent_id = a.id AND t.state = 'running'
		  RETURNING t.id, t.run_id, t.task_id, t.try_number, t.attempt_id, t.agent_id,
		            e.started AND t.started_at = now() AS just_started),
		ev AS (
		  -- now() is fixed for the transaction, so started_at = now() means
		  -- this very statement recorded the start.
		  INSERT INTO events (run_id, ti_id, task_id, try_number, attempt_id, agent_id, kind, message)
		  SELECT run_id, id, task_id, try_number, attempt_id, agent_id, 'ti_started',
		         format('try %s started on agent %s', try_number, agent_id)
		    FROM upd WHERE just_started)
		SELECT EXISTS (SELECT 1 FROM a),
		       coalesce((SELECT jsonb_agg(jsonb_build_object(
		           'ti_id', e.ti_id, 'attempt_id', e.attempt_id, 'state', t.state,
		           'current', t.attempt_id, 'reason', t.reason))
		         FROM e LEFT JOIN task_instances t ON t.id = e.ti_id
		        WHERE e.ti_id NOT IN (SELECT id FROM upd)), '[]'),
		       now()`

// heartbeatOldestSQL sets agent $1's oldest_heartbeat_at, in the
// heartbeat's transaction after heartbeatSQL: no later than the stamp of
// any running TI of the agent once it commits (the listed ones now hold
// now()), so the agent-lost reaper finds every stale TI through it.
const heartbeatOldestSQL = `
	UPDATE agents SET oldest_heartbeat_at = least(now(), (
	         SELECT min(t.last_heartbeat_at) FROM task_instances t
	          WHERE t.agent_id = $1 AND t.state = 'running'))
	 WHERE id = $1 AND state <> 'deregistered'`

func deref[T ~string](s *T) T {
	if s == nil {
		return ""
	}
	return *s
}

// stopReason classifies why attempt is no longer current, given the TI's
// state (empty when there is no such TI), current attempt and reason.
func stopReason(ti state.TI, current, attempt string, reason state.Reason) StopReason {
	switch {
	case ti == "":
		return StopUnknown
	case current != attempt:
		return StopSuperseded
	case ti == state.TICancelled:
		return StopCancelled
	case reason == state.ReasonAgentLost || reason == state.ReasonDispatchLost || reason == state.ReasonOrphaned ||
		(reason == state.ReasonExecutionTimeout && ti != state.TIRunning):
		return StopReaped
	default:
		return StopFinished
	}
}

// confParams renders a run's conf (runs.conf) as the strings its tasks
// receive as VIGIL_PARAM_<KEY>: a string as is, a number as written, a
// bool as true or false. nil for no conf.
func confParams(conf []byte) (map[string]string, error) {
	if len(conf) == 0 {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(conf))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out, nil
}

// errNoRows reports pgx.ErrNoRows.
func errNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

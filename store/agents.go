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
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
)

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

func deref[T ~string](s *T) T {
	if s == nil {
		return ""
	}
	return *s
}

// stopReason classifies why attempt is no longer current, given the TI's
// state (empty when there is no such TI), current attempt and reason.
func stopReason(ti state.TI, current, attempt string, reason state.Reason) state.StopReason {
	switch {
	case ti == "":
		return state.StopUnknown
	case current != attempt:
		return state.StopSuperseded
	case ti == state.TICancelled:
		return state.StopCancelled
	case reason == state.ReasonAgentLost || reason == state.ReasonDispatchLost || reason == state.ReasonOrphaned ||
		(reason == state.ReasonExecutionTimeout && ti != state.TIRunning):
		return state.StopReaped
	default:
		return state.StopFinished
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

// StaleAgent is an agent still marked active whose last heartbeat is older
// than the threshold (Strøm phase 1).
type StaleAgent struct {
	AgentID         int64
	Name            string
	LastHeartbeatAt time.Time
	Running         int
	Age             time.Duration
}

// ListStaleAgents lists up to limit active agents silent since before
// now − threshold.
func (s *Store) ListStaleAgents(ctx context.Context, now time.Time, threshold time.Duration, limit int) ([]StaleAgent, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT a.id, a.name, a.last_heartbeat_at,
		       (SELECT count(*) FROM task_instances t WHERE t.agent_id = a.id AND t.state = 'running'),
		       (extract(epoch FROM $1::timestamptz - a.last_heartbeat_at) * 1e6)::bigint
		  FROM agents a
		 WHERE a.state = 'active' AND a.last_heartbeat_at < $1::timestamptz - $2 * interval '1 microsecond'
		 ORDER BY a.last_heartbeat_at LIMIT $3`, now, micros(threshold), limit)
	if err != nil {
		return nil, fmt.Errorf("list stale agents: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (StaleAgent, error) {
		var c StaleAgent
		var age int64
		err := r.Scan(&c.AgentID, &c.Name, &c.LastHeartbeatAt, &c.Running, &age)
		c.Age = fromMicros(age)
		return c, err
	})
}

// MarkAgentsInactive flips each listed agent to inactive in one fenced
// statement, only where it is still active with the listed heartbeat (a
// heartbeat or claim that landed since wins); its next heartbeat or claim
// reactivates it. It returns the agents that changed.
func (s *Store) MarkAgentsInactive(ctx context.Context, epoch int64, cs []StaleAgent) ([]StaleAgent, error) {
	ids, stamps := make([]int64, len(cs)), make([]time.Time, len(cs))
	byID := make(map[int64]StaleAgent, len(cs))
	for i, c := range cs {
		ids[i], stamps[i], byID[c.AgentID] = c.AgentID, c.LastHeartbeatAt, c
	}
	var landed []StaleAgent
	err := s.LeaderTx(ctx, epoch, func(tx Tx) error {
		rows, err := tx.Query(ctx, `
			UPDATE agents a SET state = 'inactive'
			  FROM unnest($1::bigint[], $2::timestamptz[]) AS i(id, stamp)
			 WHERE a.id = i.id AND a.state = 'active' AND a.last_heartbeat_at = i.stamp
			RETURNING a.id`, ids, stamps)
		if err != nil {
			return err
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		for _, id := range got {
			landed = append(landed, byID[id])
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mark %d agent(s) inactive: %w", len(cs), err)
	}
	return landed, nil
}

// ListAgents returns up to limit agents with their running counts, newest
// first, those with an id below before (0: from the newest): one page of
// GET /v1/agents, read backwards along the primary key.
func (s *Store) ListAgents(ctx context.Context, before int64, limit int) ([]Agent, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.pool.Query(ctx, `
		SELECT a.id, a.name, a.tags, a.capacity, a.state, a.registered_at, a.last_heartbeat_at,
		       (SELECT count(*) FROM task_instances t WHERE t.agent_id = a.id AND t.state = 'running')
		  FROM agents a WHERE a.id < $1 ORDER BY a.id DESC LIMIT $2`, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Agent, error) {
		var a Agent
		err := r.Scan(&a.ID, &a.Name, &a.Tags, &a.Capacity, &a.State, &a.RegisteredAt, &a.LastHeartbeatAt, &a.Running)
		return a, err
	})
}

// AgentRunning lists every running TI of agentID, as agent-lost-shaped
// candidates (ephemeral deregistration).
func (s *Store) AgentRunning(ctx context.Context, agentID int64) ([]StaleRunning, error) {
	rows, err := s.pool.Query(ctx, runningColumns+`
		 WHERE state = 'running' AND agent_id = $2 AND attempt_id IS NOT NULL
		   AND last_heartbeat_at IS NOT NULL ORDER BY id`, time.Now(), agentID)
	if err != nil {
		return nil, fmt.Errorf("list running of agent %d: %w", agentID, err)
	}
	return collectRunning(rows)
}

// DeregisterAgent marks an ephemeral agent deregistered and applies the
// given guarded transitions to its running TIs, in one transaction (KiCI
// scaler-managed agents: no recovery window). It returns those that landed.
// Errors: ErrNotFound when the agent does not exist.
func (s *Store) DeregisterAgent(ctx context.Context, agentID int64, reaps []Reap) ([]Reap, error) {
	var landed []Reap
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE agents SET state = 'deregistered' WHERE id = $1`, agentID)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("agent %d: %w", agentID, ErrNotFound)
		}
		landed, err = applyReapsTx(ctx, tx, reaps)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("deregister agent %d: %w", agentID, err)
	}
	return landed, nil
}

// MaxLiveAgentTags bounds LiveAgentTags: the tag sets of this many agents
// at most are read.
const MaxLiveAgentTags = 10000

// LiveAgentTags returns the tag set of each agent active since
// now − activeWindow (the agents dispatch-lost counts as able to take
// work; liveAgentsCTE), at most MaxLiveAgentTags of them: what `dags
// apply` checks a DAG's task tags against.
func (s *Store) LiveAgentTags(ctx context.Context, now time.Time, activeWindow time.Duration) ([][]string, error) {
	rows, err := s.pool.Query(ctx, `WITH `+liveAgentsCTE+` SELECT tags FROM live LIMIT $2`,
		now, MaxLiveAgentTags, micros(activeWindow))
	if err != nil {
		return nil, fmt.Errorf("live agent tags: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[[]string])
}

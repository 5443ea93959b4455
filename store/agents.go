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

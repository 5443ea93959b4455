package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// FenceName is the leader_fence row guarding the scheduler and reapers.
const FenceName = "scheduler"

// FencedError is returned by LeaderTx when the fence holds another epoch:
// a newer leader exists and this one must stop leading at once
// (docs/design.md §8, Temporal-style range_id fencing). AcquireFence and
// AcquireFenceIn return it when the fence refuses a candidate; then
// Refusal says why and Fence holds the fence as it was read.
type FencedError struct {
	Ours    int64 // our token (epoch)
	Current int64 // the fence's token
	Holder  string
	// Refusal is set by AcquireFenceIn: FenceRefusedRevision or
	// FenceRefusedDomain. Empty from LeaderTx and AcquireFence.
	Refusal string
	// Domain and Revision are the candidate's, from AcquireFenceIn.
	Domain   FenceDomain
	Revision int64
	// Fence is the fence row that refused the candidate (AcquireFenceIn).
	Fence *FenceState
}

func (e *FencedError) Error() string {
	if e.Refusal != "" && e.Fence != nil {
		return fmt.Sprintf("leader fence refused %s revision %d: %s (fence: generation %d, domain %s, revision %d, held by %q)",
			e.Domain, e.Revision, e.Refusal, e.Fence.Generation, e.Fence.Domain.String(), e.Fence.Revision, e.Holder)
	}
	return fmt.Sprintf("leader write fenced: our epoch %d, fence epoch %d held by %q", e.Ours, e.Current, e.Holder)
}

// IsFenced reports whether err is (or wraps) a *FencedError.
func IsFenced(err error) bool {
	var f *FencedError
	return errors.As(err, &f)
}

// NextLiteEpoch draws a fresh epoch from the database sequence, for the
// static (Lite) elector. Each process start gets a larger value, so a
// second Lite process against the same database fences out the first.
func (s *Store) NextLiteEpoch(ctx context.Context) (int64, error) {
	var e int64
	err := s.pool.QueryRow(ctx, `SELECT nextval('leader_epoch_seq')`).Scan(&e)
	return e, err
}

// AcquireFence sets the fence to the raw token epoch for holder if epoch
// is newer than the stored one (UPDATE ... WHERE epoch < $epoch), keeping
// the fence's generation and domain; the electors use AcquireFenceIn,
// which names the domain. It is for tests and tools. It returns a
// *FencedError when the fence already holds an equal or newer epoch:
// final, this epoch can never lead. It runs on the leader pool, so when an
// older term's leader transaction still holds the row FOR SHARE it waits
// at most LeaderTimeouts.Lock and then fails with an error IsLockTimeout
// reports; the caller retries while it still holds its election (the old
// transaction ends at the latest after LeaderTimeouts.IdleInTransaction).
func (s *Store) AcquireFence(ctx context.Context, epoch int64, holder string) error {
	tag, err := s.leader.Exec(ctx, `
		UPDATE leader_fence SET epoch = $2, revision = $2 - generation * $4, holder = $3, acquired_at = now()
		WHERE name = $1 AND epoch < $2 AND $2 - generation * $4 < $4`, FenceName, epoch, holder, int64(FenceRevisionLimit))
	if IsLockTimeout(err) {
		return fmt.Errorf("acquire fence: an older term's leader transaction still locks it (lock_timeout %s): %w",
			s.leaderTimeouts.Lock, err)
	}
	if err != nil {
		return fmt.Errorf("acquire fence: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	cur, h, err := s.Fence(ctx)
	if err != nil {
		return fmt.Errorf("acquire fence: %w", err)
	}
	return &FencedError{Ours: epoch, Current: cur, Holder: h}
}

// Fence returns the current fence epoch and its holder.
func (s *Store) Fence(ctx context.Context) (epoch int64, holder string, err error) {
	var h *string
	err = s.pool.QueryRow(ctx, `SELECT epoch, holder FROM leader_fence WHERE name = $1`, FenceName).Scan(&epoch, &h)
	if h != nil {
		holder = *h
	}
	return epoch, holder, err
}

// Tx is the transaction handed to LeaderTx callbacks.
type Tx = pgx.Tx

// LeaderTx runs fn in a transaction that first locks the fence row FOR
// SHARE and checks it still holds epoch. If not, nothing is written and a
// *FencedError is returned. FOR SHARE blocks a newer leader's
// AcquireFence until this transaction ends, so no write from a deposed
// epoch can commit after the fence moved (docs/design.md §8).
//
// The transaction runs on the leader pool, bounded by LeaderTimeouts: a
// statement waits for a lock at most Lock and runs at most Statement, and
// PostgreSQL terminates the session when it sits idle inside the
// transaction for IdleInTransaction, so fn must only run its statements
// and never wait on anything else. Errors from fn are returned as is.
func (s *Store) LeaderTx(ctx context.Context, epoch int64, fn func(tx Tx) error) error {
	tx, err := s.leader.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin leader transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
	if err := checkFence(ctx, tx, epoch); err != nil {
		return err
	}
	if f := s.signals.HoldLeaderTx; f != nil {
		if held, err := f(ctx, tx, epoch); held {
			return err
		}
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// checkFence locks the fence row FOR SHARE and returns a *FencedError
// unless it holds epoch. The same statement sets the transaction-local
// vigil.epoch, which events.epoch defaults to (migration 012), so every
// event the transaction writes records the term that wrote it.
func checkFence(ctx context.Context, tx pgx.Tx, epoch int64) error {
	var cur int64
	var holder *string
	err := tx.QueryRow(ctx, checkFenceSQL, FenceName, epoch).Scan(&cur, &holder, nil)
	if err != nil {
		return fmt.Errorf("check fence: %w", err)
	}
	if cur != epoch {
		h := ""
		if holder != nil {
			h = *holder
		}
		return &FencedError{Ours: epoch, Current: cur, Holder: h}
	}
	return nil
}

// FenceDomain names where a fence revision comes from (migration 005).
// Revisions of different domains are not comparable, so the fence refuses
// a candidate of another domain until an operator resets it.
type FenceDomain string

// The fence domains.
const (
	// FenceDomainLite: revisions drawn from the leader_epoch_seq sequence
	// by `vigil lite` (Store.NextLiteEpoch).
	FenceDomainLite FenceDomain = "lite"
	// FenceDomainEtcd: the etcd leader key's create revision (Pro).
	FenceDomainEtcd FenceDomain = "etcd"
)

// String returns the domain, or "(none)" for a fence no one took since
// its last reset.
func (d FenceDomain) String() string {
	if d == "" {
		return "(none)"
	}
	return string(d)
}

// FenceRevisionLimit bounds a revision (exclusive): a term's token is
// generation × FenceRevisionLimit + revision, so every token of a newer
// generation is above every token of an older one.
const FenceRevisionLimit = 1 << 40

// Reasons the fence refuses a candidate (FencedError.Refusal).
const (
	// FenceRefusedRevision: the fence already holds an equal or newer
	// revision of the candidate's domain. For a Lite process it means a
	// later Lite process took over; for Pro, that etcd's revisions went
	// back (a restore from a backup, a new cluster): every campaign is
	// refused until an operator resets the fence.
	FenceRefusedRevision = "the fence holds an equal or newer revision of this domain"
	// FenceRefusedDomain: the fence belongs to the other domain (Lite and
	// Pro against one database); only a reset changes it.
	FenceRefusedDomain = "the fence belongs to another domain"
)

// FenceState is the leader_fence row: the fencing token Epoch =
// Generation × FenceRevisionLimit + Revision, the Domain Revision comes
// from ("" after a reset: the next acquirer sets it), and the current
// Holder with the time it took the fence (nil before anyone did).
type FenceState struct {
	Name       string      `json:"name"`
	Generation int64       `json:"generation"`
	Domain     FenceDomain `json:"domain,omitempty"`
	Revision   int64       `json:"revision"`
	Epoch      int64       `json:"epoch"`
	Holder     string      `json:"holder,omitempty"`
	AcquiredAt *time.Time  `json:"acquired_at,omitempty"`
}

// FenceToken returns the token of revision in generation: what a term
// that took the fence with it writes under.
func FenceToken(generation, revision int64) int64 {
	return generation*FenceRevisionLimit + revision
}

// FenceState reads the fence row.
func (s *Store) FenceState(ctx context.Context) (FenceState, error) {
	return readFence(ctx, s.pool, "")
}

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func readFence(ctx context.Context, q queryRower, suffix string) (FenceState, error) {
	var f FenceState
	var dom, holder *string
	err := q.QueryRow(ctx, `
		SELECT name, generation, domain, revision, epoch, holder, acquired_at
		FROM leader_fence WHERE name = $1`+suffix, FenceName).
		Scan(&f.Name, &f.Generation, &dom, &f.Revision, &f.Epoch, &holder, &f.AcquiredAt)
	if err != nil {
		return f, fmt.Errorf("read leader fence: %w", err)
	}
	if dom != nil {
		f.Domain = FenceDomain(*dom)
	}
	if holder != nil {
		f.Holder = *holder
	}
	return f, nil
}

// AcquireFenceIn moves the fence to revision of domain for holder and
// returns the term's token (FenceToken of the fence's generation). The
// fence accepts it when its domain is domain or unset and its revision is
// smaller; otherwise it returns a *FencedError whose Refusal says which
// rule refused it (FenceRefusedRevision, FenceRefusedDomain) and whose
// Fence is the fence as read. Lock timeouts behave as in AcquireFence. A
// domain other than FenceDomainLite/FenceDomainEtcd, or a revision outside
// 1..FenceRevisionLimit-1, is an error.
func (s *Store) AcquireFenceIn(ctx context.Context, domain FenceDomain, revision int64, holder string) (int64, error) {
	if domain != FenceDomainLite && domain != FenceDomainEtcd {
		return 0, fmt.Errorf("acquire fence: domain %q must be %q or %q", domain, FenceDomainLite, FenceDomainEtcd)
	}
	if revision < 1 || revision >= FenceRevisionLimit {
		return 0, fmt.Errorf("acquire fence: %s revision %d is outside 1..%d", domain, revision, int64(FenceRevisionLimit-1))
	}
	var token int64
	err := s.leader.QueryRow(ctx, `
		UPDATE leader_fence
		   SET domain = $2, revision = $3, epoch = generation * $5 + $3, holder = $4, acquired_at = now()
		 WHERE name = $1 AND (domain IS NULL OR domain = $2) AND revision < $3
		RETURNING epoch`, FenceName, string(domain), revision, holder, int64(FenceRevisionLimit)).Scan(&token)
	if IsLockTimeout(err) {
		return 0, fmt.Errorf("acquire fence: an older term's leader transaction still locks it (lock_timeout %s): %w",
			s.leaderTimeouts.Lock, err)
	}
	if err == nil {
		return token, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("acquire fence: %w", err)
	}
	f, err := s.FenceState(ctx)
	if err != nil {
		return 0, fmt.Errorf("acquire fence: %w", err)
	}
	refusal := FenceRefusedRevision
	if f.Domain != "" && f.Domain != domain {
		refusal = FenceRefusedDomain
	}
	return 0, &FencedError{
		Ours: FenceToken(f.Generation, revision), Current: f.Epoch, Holder: f.Holder,
		Refusal: refusal, Domain: domain, Revision: revision, Fence: &f,
	}
}

// FenceAuditEntry is one fence_audit row: an operator's reset of the
// fence, with the fence before it and the generation it started.
type FenceAuditEntry struct {
	ID              int64       `json:"id"`
	Action          string      `json:"action"`
	At              time.Time   `json:"at"`
	Actor           string      `json:"actor"`
	Reason          string      `json:"reason"`
	BeforeGen       int64       `json:"before_generation"`
	BeforeDomain    FenceDomain `json:"before_domain,omitempty"`
	BeforeRevision  int64       `json:"before_revision"`
	BeforeHolder    string      `json:"before_holder,omitempty"`
	AfterGeneration int64       `json:"after_generation"`
}

// ResetFence starts a new generation of the fence: domain unset, revision
// 0, no holder, token FenceToken(generation+1, 0), above every token of
// the old generation. Any leader of the old generation is fenced out at
// its next write, and the next candidate of either domain takes the fence
// with any revision. In the same transaction it records actor, reason and
// the fence before the reset in fence_audit, and a row of the audit log:
// ctx's AuditRecord when the API resets it, else one naming actor with
// auth "database" (`vigil fence reset --database-url`). actor and reason must not be
// empty. It waits for leader transactions that hold the fence row FOR
// SHARE (at most the leader idle-in-transaction timeout).
func (s *Store) ResetFence(ctx context.Context, actor, reason string) (before, after FenceState, err error) {
	if strings.TrimSpace(actor) == "" {
		return before, after, errors.New("reset fence: actor must not be empty (the audit records who reset it)")
	}
	if strings.TrimSpace(reason) == "" {
		return before, after, errors.New("reset fence: reason must not be empty (the audit records why)")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return before, after, fmt.Errorf("reset fence: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if before, err = readFence(ctx, tx, " FOR UPDATE"); err != nil {
		return before, after, fmt.Errorf("reset fence: %w", err)
	}
	if _, err = tx.Exec(ctx, `
		UPDATE leader_fence
		   SET generation = generation + 1, domain = NULL, revision = 0,
		       epoch = (generation + 1) * $2, holder = NULL, acquired_at = now()
		 WHERE name = $1`, FenceName, int64(FenceRevisionLimit)); err != nil {
		return before, after, fmt.Errorf("reset fence: %w", err)
	}
	var dom *string
	if before.Domain != "" {
		d := string(before.Domain)
		dom = &d
	}
	if _, err = tx.Exec(ctx, `
		INSERT INTO fence_audit (name, action, actor, reason, before_generation, before_domain,
		                         before_revision, before_holder, after_generation)
		VALUES ($1, 'reset', $2, $3, $4::bigint, $5, $6, NULLIF($7, ''), $4::bigint + 1)`,
		FenceName, actor, reason, before.Generation, dom, before.Revision, before.Holder); err != nil {
		return before, after, fmt.Errorf("reset fence: record audit: %w", err)
	}
	rec := AuditFrom(ctx)
	if rec == nil { // `vigil fence reset` on the database, not through the API
		rec = &AuditRecord{Actor: actor, Auth: "database", Route: "vigil fence reset", Target: "fence/" + FenceName}
	}
	if rec.Message == "" {
		rec.Message = reason
	}
	if err = insertAudit(ctx, tx, rec); err != nil {
		return before, after, fmt.Errorf("reset fence: %w", err)
	}
	if after, err = readFence(ctx, tx, ""); err != nil {
		return before, after, fmt.Errorf("reset fence: %w", err)
	}
	if err = tx.Commit(ctx); err != nil {
		return before, after, fmt.Errorf("reset fence: %w", err)
	}
	rec.written = true
	return before, after, nil
}

// FenceAudit returns the last limit fence_audit rows, newest first.
func (s *Store) FenceAudit(ctx context.Context, limit int) ([]FenceAuditEntry, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, action, at, actor, reason, before_generation, coalesce(before_domain, ''),
		       before_revision, coalesce(before_holder, ''), after_generation
		FROM fence_audit WHERE name = $1 ORDER BY id DESC LIMIT $2`, FenceName, limit)
	if err != nil {
		return nil, fmt.Errorf("read fence audit: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (FenceAuditEntry, error) {
		var e FenceAuditEntry
		var dom string
		err := r.Scan(&e.ID, &e.Action, &e.At, &e.Actor, &e.Reason, &e.BeforeGen, &dom,
			&e.BeforeRevision, &e.BeforeHolder, &e.AfterGeneration)
		e.BeforeDomain = FenceDomain(dom)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read fence audit: %w", err)
	}
	return out, nil
}

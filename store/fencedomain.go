package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

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
// the fence before the reset in fence_audit. actor and reason must not be
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
	if after, err = readFence(ctx, tx, ""); err != nil {
		return before, after, fmt.Errorf("reset fence: %w", err)
	}
	if err = tx.Commit(ctx); err != nil {
		return before, after, fmt.Errorf("reset fence: %w", err)
	}
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

// Package leader decides which replica runs the scheduler loop and the
// reapers, and hands that replica a fencing epoch (docs/design.md §1, §8).
//
// What it does not guarantee: election alone never gives mutual exclusion
// over PostgreSQL. Two replicas can both believe they lead for a moment
// (a paused process, an expired lease it has not noticed). Safety comes from
// the fence: every leader-only write runs in store.LeaderTx with the term's
// epoch, and a stale epoch writes nothing. Callers must therefore treat a
// fenced error as the end of their term.
package leader

import (
	"context"
	"errors"
	"sync"
)

// ErrNotLeading is returned by a leader-only operation asked of a replica
// that does not lead (a forced sweep: the API then asks the leader through
// the database instead).
var ErrNotLeading = errors.New("this replica does not lead")

// Term is one period of leadership. Epoch is the fencing token written to
// leader_fence and checked by every leader write: store.FenceToken of the
// fence's generation and Revision. Revision is the domain's own number
// (Lite: a sequence value; Pro: the etcd leader key's create revision); in
// generation 0, the generation before any `vigil fence reset`, Epoch equals
// Revision. Holder names the replica.
type Term struct {
	Epoch    int64
	Revision int64
	Holder   string
}

// Callbacks follow client-go's leaderelection shape.
type Callbacks struct {
	// OnStartedLeading runs the leader's work for one term and blocks until
	// it ends. ctx is cancelled the moment leadership is lost. Returning an
	// error that store.IsFenced reports ends the term at once.
	OnStartedLeading func(ctx context.Context, term Term) error
	// OnStoppedLeading is called after OnStartedLeading returns, with its
	// error (nil on a clean stop). Optional.
	OnStoppedLeading func(term Term, err error)
}

// Status is a snapshot of what this replica knows about leadership.
type Status struct {
	Leading bool   `json:"leading"`
	Epoch   int64  `json:"epoch"`
	Leader  string `json:"leader"` // replica id of the known leader, "" if none
	Self    string `json:"self"`
	// FenceBlocked is true while the PostgreSQL fence refuses this
	// replica's candidacy: a stored revision above the one etcd handed out
	// (etcd restored from a backup or replaced), or a fence of the other
	// domain (Lite and Pro against one database). Nobody can lead until an
	// operator runs `vigil fence reset`; vigil_leader_fence_blocked is 1 and
	// GET /monitor/health answers 503 meanwhile. It clears when this
	// replica leads or the fence row changes (a reset, another leader).
	FenceBlocked bool `json:"fence_blocked,omitempty"`
	// FenceBlockedReason says why, naming both sides' generation, domain
	// and revision; "" when not blocked.
	FenceBlockedReason string `json:"fence_blocked_reason,omitempty"`
}

// Elector campaigns for leadership and runs the callbacks for each term.
type Elector interface {
	// Run blocks until ctx is cancelled, leading whenever elected.
	Run(ctx context.Context, cb Callbacks) error
	// Status reports the current view; safe for concurrent use.
	Status() Status
}

// statusBox is a mutex-guarded Status shared by the electors.
type statusBox struct {
	mu sync.Mutex
	s  Status
}

func (b *statusBox) get() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.s
}

func (b *statusBox) set(f func(*Status)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(&b.s)
}

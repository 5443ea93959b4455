package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// Static is Lite's elector: the process always leads, but its term is
// still fenced by an epoch drawn from a database sequence (docs/design.md §1). A
// second Lite process started against the same database draws a larger
// epoch and fences this one out; this one then stops leading for good,
// says so in the log, and keeps serving the API.
type Static struct {
	store   *store.Store
	self    string
	log     *slog.Logger
	metrics *metrics.Metrics
	status  statusBox
	block   *fenceBlock
}

// NewStatic returns a Static elector for replica id self. log and m may be
// nil.
func NewStatic(st *store.Store, self string, log *slog.Logger, m *metrics.Metrics) *Static {
	if log == nil {
		log = slog.Default()
	}
	s := &Static{store: st, self: self, log: log, metrics: m}
	s.block = &fenceBlock{store: st, status: &s.status, m: m, log: log.With("elector", "static", "replica", self)}
	s.status.set(func(x *Status) { x.Self = self })
	return s
}

// Status implements Elector.
func (s *Static) Status() Status { return s.status.get() }

// Run takes an epoch (retrying while the database is unreachable), leads
// until ctx ends or the fence rejects a write, and then returns (on ctx)
// or idles (when fenced by another process). When the fence rejects a
// write because an operator reset it (`vigil fence reset`: no holder), it
// takes a new epoch and leads again. It returns nil when ctx is cancelled.
func (s *Static) Run(ctx context.Context, cb Callbacks) error {
	for {
		again, err := s.runTerm(ctx, cb)
		if !again {
			return err
		}
	}
}

// runTerm is one term of Run; again reports that the fence was reset and
// Run should take a new epoch.
func (s *Static) runTerm(ctx context.Context, cb Callbacks) (again bool, _ error) {
	term, err := s.acquire(ctx)
	if err != nil {
		return false, nil // ctx cancelled
	}
	s.setLeading(term, true)
	s.log.Info("leading", "epoch", term.Epoch, "replica", term.Holder, "elector", "static")
	err = cb.OnStartedLeading(ctx, term)
	s.setLeading(term, false)
	if cb.OnStoppedLeading != nil {
		cb.OnStoppedLeading(term, err)
	}
	var fenced *store.FencedError
	errors.As(err, &fenced)
	switch afterTerm(err, ctx.Err() != nil) {
	case termRetake:
		s.log.Warn("the leader fence was reset (vigil fence reset); taking a new epoch",
			"our_epoch", fenced.Ours, "fence_epoch", fenced.Current)
		return true, nil
	case termPark:
		s.status.set(func(x *Status) { x.Leader = fenced.Holder })
		s.log.Error("another Vigil process took over scheduling for this database; this process stopped leading and only serves the API",
			"our_epoch", fenced.Ours, "fence_epoch", fenced.Current, "new_leader", fenced.Holder)
		<-ctx.Done()
		return false, nil
	case termFailed:
		return false, fmt.Errorf("static elector: leader work ended: %w", err)
	}
	return false, nil
}

// termEnd is what a static elector does once a term's work returned.
type termEnd int

const (
	termDone   termEnd = iota // ctx ended: Run returns nil
	termRetake                // an operator reset the fence (no holder): take a new epoch
	termPark                  // another process holds the fence: serve the API until ctx ends, never campaign back
	termFailed                // the work failed otherwise: Run returns the error
)

// afterTerm decides what follows a term whose work returned err, ctxDone
// telling whether Run's context has ended. Parking rather than drawing a
// new epoch is what keeps two Lite processes on one database from taking
// the fence from each other in turn: the newer one keeps it.
func afterTerm(err error, ctxDone bool) termEnd {
	// Ifs, not a tagless switch, so that the mutation run can test the
	// conditions (see Etcd.candidacy).
	var fenced *store.FencedError
	if errors.As(err, &fenced) {
		if fenced.Holder == "" && !ctxDone {
			return termRetake
		}
		return termPark
	}
	if err != nil && !ctxDone {
		return termFailed
	}
	return termDone
}

// acquire draws an epoch and takes the fence with it (takeFence retries
// lock timeouts in place), and on any other failure draws again after a
// backoff. A fence refused on its revision means another Lite process drew
// a later epoch moments ago: that epoch is final, and acquire draws a newer
// one. A fence of the etcd domain (a Pro cluster uses this database)
// blocks it (Status.FenceBlocked) until an operator resets the fence; it
// keeps retrying meanwhile. It returns an error only when ctx ends.
func (s *Static) acquire(ctx context.Context) (Term, error) {
	backoff := 500 * time.Millisecond
	log := s.log.With("elector", "static", "replica", s.self)
	for {
		rev, err := s.store.NextLiteEpoch(ctx)
		if err == nil {
			var token int64
			token, err = takeFence(ctx, s.store, store.FenceDomainLite, rev, s.self, log)
			if err == nil {
				s.block.clear("took the fence")
				return Term{Epoch: token, Revision: rev, Holder: s.self}, nil
			}
			var fenced *store.FencedError
			if errors.As(err, &fenced) && fenced.Refusal == store.FenceRefusedDomain && fenced.Fence != nil {
				s.block.set(ctx, fenced, false)
			}
		}
		if ctx.Err() != nil {
			return Term{}, ctx.Err()
		}
		s.log.Warn("could not take the leader epoch; retrying", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return Term{}, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (s *Static) setLeading(term Term, leading bool) {
	s.status.set(func(x *Status) {
		x.Leading, x.Epoch = leading, term.Epoch
		if leading {
			x.Leader = term.Holder
		}
	})
	if s.metrics != nil {
		s.metrics.LeaderChanges.Inc()
		s.metrics.LeaderEpoch.Set(float64(term.Epoch))
		if leading {
			s.metrics.Leader.Set(1)
		} else {
			s.metrics.Leader.Set(0)
		}
	}
}

package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// Defaults and bounds of EtcdConfig (docs/design.md §8).
const (
	// DefaultEtcdPrefix is the default election key prefix. Candidates put
	// PREFIX/<lease id in hex> with their replica id as the value.
	DefaultEtcdPrefix = "/vigil/leader"
	// DefaultElectionTTL is the default session (lease) TTL: docs/design.md §8. It
	// is store.DefaultElectionTTL, the basis of the default leader
	// timeouts (store.DefaultLeaderTimeouts).
	DefaultElectionTTL = store.DefaultElectionTTL
	// MinElectionTTL is the shortest EtcdConfig.TTL. etcd extends leases
	// shorter than 1.5 × its election timeout (1 s by default), so 2 s is
	// the shortest TTL that a default etcd honours as given.
	MinElectionTTL = 2 * time.Second
	// MaxElectionTTL is the longest EtcdConfig.TTL: a crashed leader is
	// replaced only after the TTL, so longer values only delay failover.
	MaxElectionTTL = 5 * time.Minute
)

// Timings of the elector's own calls to etcd.
const (
	// etcdCallTimeout bounds the best-effort calls made while a term or a
	// candidacy ends (Resign, Revoke) and the ownership check after
	// Campaign. Past it the lease expires on its own within the TTL.
	etcdCallTimeout = 2 * time.Second
	// Backoff between failed attempts to campaign (etcd or PostgreSQL
	// unreachable, fence already newer, ...).
	minRetryBackoff = 200 * time.Millisecond
	maxRetryBackoff = 5 * time.Second
	// observeRetry is the pause before Observe is restarted after its
	// channel closed on an etcd error.
	observeRetry = 500 * time.Millisecond
)

// EtcdConfig configures NewEtcd. Client, Store and Self are required.
type EtcdConfig struct {
	// Client is the etcd client used for the session, the election and the
	// observer. The elector never closes it.
	Client *clientv3.Client
	// Store holds the leader_fence row; each won election moves it to the
	// term's epoch with store.AcquireFence (docs/design.md §8).
	Store *store.Store
	// Self is this replica's id (the --replica-id flag). It is the value of
	// the leader key, so it must be unique among the replicas.
	Self string
	// Prefix is the election key prefix; default DefaultEtcdPrefix. A
	// trailing "/" is dropped; "/" alone is refused.
	Prefix string
	// TTL is the session lease TTL; default DefaultElectionTTL (10 s). It
	// must be a whole number of seconds (etcd lease TTLs are in seconds)
	// between MinElectionTTL and MaxElectionTTL. A leader that loses
	// contact with etcd is deposed, and a crashed leader replaced, within
	// about one TTL.
	TTL time.Duration
	// Logger receives the elector's logs; default slog.Default().
	Logger *slog.Logger
	// Metrics, when set, receives vigil_leader (1/0), vigil_leader_epoch and
	// vigil_leader_changes_total (on every gain and loss). The elector does
	// not count vigil_fenced_writes_rejected_total: the leader work that got
	// the fenced error (scheduler.Lead, the reapers) already counts it.
	Metrics *metrics.Metrics
}

// Etcd is Pro's elector (docs/design.md §1, §8): an etcd lease election built on
// go.etcd.io/etcd/client/v3/concurrency, fenced in PostgreSQL. Every
// replica runs one; at most one of them holds the etcd leader key at a
// time, and it runs the leader work under a term whose epoch is the leader
// key's create revision (election.Rev()).
//
// Each candidacy uses a fresh concurrency.Session (one lease): Campaign,
// then check that the leader key really is ours (etcd #19597), then move
// the PostgreSQL fence to the epoch (store.AcquireFence, retried on lock
// timeouts while the session lives: adr/0010), then run
// Callbacks.OnStartedLeading until the lease is lost (session.Done()), the
// work returns, Run's context ends or Resign is called.
//
// What it does not guarantee (in the manner of client-go's
// tools/leaderelection): the etcd lease gives no mutual exclusion over
// PostgreSQL. A leader learns that its lease is gone only when a keepalive
// fails or the lease runs out on its own clock; until then, and for as long
// as it is paused (GC, SIGSTOP, a slow disk), it still believes it leads
// while another replica already does. Status().Leading can therefore be
// true on two replicas at once: for up to about a third of the TTL after
// a lease is revoked, and for longer when a process is paused. The elector
// also cannot stop leader work that ignores its context. Safety comes only
// from the fence: the new leader moves leader_fence to its larger epoch,
// and every leader-only write of an older epoch (store.LeaderTx) is then
// refused with a *store.FencedError and writes nothing. Leader work must
// do all its leader-only writes through the fence and treat a fenced error
// as the end of its term.
type Etcd struct {
	cli    *clientv3.Client
	store  *store.Store
	self   string
	prefix string
	ttl    int // seconds
	log    *slog.Logger
	m      *metrics.Metrics
	status statusBox
	block  *fenceBlock // vigil_leader_fence_blocked and Status.FenceBlocked

	// stopCtx is cancelled by Resign; Run's context derives from it.
	stopCtx    context.Context
	stopCancel context.CancelFunc

	mu        sync.Mutex
	running   bool
	lease     clientv3.LeaseID // lease of the current candidacy (see leaseID), 0 if none
	handedOff chan struct{}    // closed once Run gave up its candidacy after Resign
	handOnce  *sync.Once
	resignErr error // error of the resign that closed handedOff
}

var _ Elector = (*Etcd)(nil)

// NewEtcd validates cfg and returns an elector that does nothing until Run.
// Errors name the field and the rule: a missing Client, Store or Self, a
// Prefix of "/", or a TTL ("election-ttl") that is not a whole number of
// seconds within [MinElectionTTL, MaxElectionTTL].
func NewEtcd(cfg EtcdConfig) (*Etcd, error) {
	if cfg.Client == nil {
		return nil, errors.New("etcd elector: an etcd client is required")
	}
	if cfg.Store == nil {
		return nil, errors.New("etcd elector: a store is required (leadership is fenced in PostgreSQL, docs/design.md §8)")
	}
	if strings.TrimSpace(cfg.Self) == "" {
		return nil, errors.New("replica-id: must not be empty (it is the value of the etcd leader key)")
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = DefaultEtcdPrefix
	}
	prefix = strings.TrimRight(prefix, "/")
	if prefix == "" {
		return nil, fmt.Errorf("election prefix: must not be %q (the election would see every key under it)", cfg.Prefix)
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = DefaultElectionTTL
	}
	if ttl < MinElectionTTL || ttl > MaxElectionTTL {
		return nil, fmt.Errorf("election-ttl: must be between %v and %v, got %v", MinElectionTTL, MaxElectionTTL, ttl)
	}
	if ttl%time.Second != 0 {
		return nil, fmt.Errorf("election-ttl: must be a whole number of seconds (etcd lease TTLs are in seconds), got %v", ttl)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	e := &Etcd{
		cli:    cfg.Client,
		store:  cfg.Store,
		self:   cfg.Self,
		prefix: prefix,
		ttl:    int(ttl / time.Second),
		log:    log.With("elector", "etcd", "replica", cfg.Self),
		m:      cfg.Metrics,
	}
	e.block = &fenceBlock{store: cfg.Store, status: &e.status, m: cfg.Metrics, log: e.log}
	e.stopCtx, e.stopCancel = context.WithCancel(context.Background())
	e.status.set(func(s *Status) { s.Self = cfg.Self })
	return e, nil
}

// Status implements Elector. Leading and Epoch describe this replica's
// current (or, when not leading, last) term. Leader is the replica id in
// the leader key as last seen by observing the election (election.Observe),
// "" before the first observation; it lags a change by the time a watch
// event takes, and it is Self exactly when Leading is true.
func (e *Etcd) Status() Status { return e.status.get() }

// Run implements Elector: it campaigns, leads whenever elected, and
// campaigns again on a new session after every term, until ctx is done or
// Resign is called; then it returns nil. Failures of etcd or PostgreSQL are
// logged and retried with backoff, never returned. The only errors are a
// missing Callbacks.OnStartedLeading and a second concurrent Run.
//
// Run does not start a new candidacy until the last OnStartedLeading has
// returned (and OnStoppedLeading has been called), so a replica never runs
// two terms at once. It does resign the election as soon as a term ends,
// so leader work that ignores its context delays only this replica.
func (e *Etcd) Run(ctx context.Context, cb Callbacks) error {
	if cb.OnStartedLeading == nil {
		return errors.New("etcd elector: Callbacks.OnStartedLeading is required")
	}
	e.mu.Lock()
	if e.stopCtx.Err() != nil { // resigned for good
		e.mu.Unlock()
		return nil
	}
	if e.running {
		e.mu.Unlock()
		return errors.New("etcd elector: Run is already running")
	}
	e.running = true
	e.handedOff, e.handOnce = make(chan struct{}), new(sync.Once)
	e.mu.Unlock()
	defer func() {
		e.handOff(nil)
		e.mu.Lock()
		e.running = false
		e.mu.Unlock()
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.stopCtx, cancel)()

	backoff := minRetryBackoff
	for ctx.Err() == nil && e.stopCtx.Err() == nil {
		err := e.candidacy(ctx, cb)
		if ctx.Err() != nil || e.stopCtx.Err() != nil {
			break
		}
		if err == nil {
			backoff = minRetryBackoff
			continue
		}
		e.log.Warn("etcd election: campaigning again after a failure", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxRetryBackoff)
	}
	return nil
}

// Resign ends this replica's candidacy for good; it is meant for SIGTERM
// (docs/design.md §8). If the replica leads, its leader work is cancelled and the
// leader key is deleted (election.Resign) at once, so a follower takes
// over in milliseconds rather than after the TTL; a pending campaign is
// withdrawn. Resign waits until Run has given up the key (or ctx is done)
// and returns the error of that resign, if any (the lease then expires on
// its own within the TTL). Run returns nil once the last OnStartedLeading
// has returned; later Runs return nil at once. Resign without a running
// Run only does the latter.
func (e *Etcd) Resign(ctx context.Context) error {
	e.mu.Lock()
	e.stopCancel()
	seeking, done := e.running && e.lease != 0, e.handedOff
	e.mu.Unlock()
	if !seeking { // no candidacy, and none can start now
		return nil
	}
	select {
	case <-done:
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.resignErr
	case <-ctx.Done():
		return fmt.Errorf("etcd elector: resign: %w", ctx.Err())
	}
}

// handOff tells a waiting Resign that Run no longer holds or seeks the
// leader key, with the error of the resign that gave it up. Before Resign
// it does nothing.
func (e *Etcd) handOff(err error) {
	if e.stopCtx.Err() == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.handOnce == nil {
		return
	}
	e.handOnce.Do(func() {
		e.resignErr = err
		close(e.handedOff)
	})
}

// leaseID returns the lease of the current candidacy: from the session's
// creation until it resigned, 0 otherwise. Tests revoke it to kill the
// session from outside.
func (e *Etcd) leaseID() clientv3.LeaseID {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lease
}

func (e *Etcd) setLease(id clientv3.LeaseID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lease = id
}

// candidacy runs one session: campaign, verify, fence, lead. It returns nil
// when it ended normally (a term ended, ctx done) and an error when the
// next candidacy should wait for a backoff.
func (e *Etcd) candidacy(ctx context.Context, cb Callbacks) error {
	session, err := e.newSession(ctx)
	if err != nil {
		return err
	}
	e.mu.Lock()
	if e.stopCtx.Err() != nil { // Resign came first
		e.mu.Unlock()
		e.closeSession(session)
		return nil
	}
	e.lease = session.Lease()
	e.mu.Unlock()
	defer func() {
		e.closeSession(session)
		e.setLease(0)
		e.handOff(nil)
	}()
	election := concurrency.NewElection(session, e.prefix)

	obsCtx, obsCancel := context.WithCancel(ctx)
	var obs sync.WaitGroup
	obs.Go(func() { e.observe(obsCtx, election) })
	defer func() {
		obsCancel()
		obs.Wait()
	}()

	// lctx ends with ctx or with the session: a lease lost while we
	// campaign aborts the campaign, and one lost while we lead ends the
	// term at once (docs/design.md §8).
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	defer context.AfterFunc(session.Ctx(), lcancel)()

	if err := e.campaign(lctx, election); err != nil {
		// Ifs, not a tagless switch: Go's coverage gives a case condition
		// no block, so the mutation run could not test it
		// (docs/reliability.md, "Mutation score").
		if ctx.Err() != nil {
			return nil
		}
		if isClosed(session.Done()) {
			e.log.Warn("etcd election: session lease expired while campaigning; campaigning again on a new session",
				"lease", fmt.Sprintf("%x", session.Lease()))
			return nil
		}
		return fmt.Errorf("campaign: %w", err)
	}

	// etcd #19597: Campaign can return after the session expired, when
	// our own key is already gone. Confirm before taking the epoch.
	won := time.Now()
	vctx, vcancel := context.WithTimeout(lctx, etcdCallTimeout)
	err = verifyOwnership(vctx, session, election)
	vcancel()
	if err != nil {
		rerr := e.resign(election)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errNotLeader) {
			e.log.Warn("etcd election: campaign returned but this replica does not hold the leader key (etcd #19597); campaigning again",
				"err", err, "resign_err", rerr)
			return nil
		}
		return fmt.Errorf("verify leadership after campaign: %w", err)
	}

	verified := time.Now()
	term := Term{Revision: election.Rev(), Holder: e.self}
	e.log.Debug("etcd election: won; taking the fence", "revision", term.Revision)
	// An older term's transaction may still hold the fence row (a frozen
	// leader): takeFence retries lock timeouts while our session lives.
	token, err := takeFence(lctx, e.store, store.FenceDomainEtcd, term.Revision, e.self, e.log)
	if err != nil {
		rerr := e.resign(election)
		if ctx.Err() != nil {
			return nil
		}
		var fenced *store.FencedError
		if errors.As(err, &fenced) {
			// A newer revision than any this etcd has handed out (etcd was
			// restored or replaced, or another etcd cluster fences this
			// database), or a Lite fence: blocked until `vigil fence reset`.
			e.log.Error("etcd election: won the election but the fence refuses it; not leading",
				"revision", fenced.Revision, "refusal", fenced.Refusal, "fence_epoch", fenced.Current,
				"fence_holder", fenced.Holder, "resign_err", rerr)
			if fenced.Fence != nil {
				e.block.set(ctx, fenced, true)
			}
		}
		return fmt.Errorf("take fence revision %d: %w", term.Revision, err)
	}
	term.Epoch = token
	// How long the steps between winning in etcd and leading took: a
	// 1,000-fault run saw 3.4 s pass between etcd naming a replica and
	// its term starting, which nothing logged could explain
	// (docs/reliability.md).
	e.log.Info("etcd election: won and fenced", "revision", term.Revision, "epoch", token,
		"verify", verified.Sub(won).Round(time.Millisecond), "fence", time.Since(verified).Round(time.Millisecond))
	return e.lead(ctx, lctx, session, election, term, cb)
}

// campaign runs election.Campaign until it returns or ctx is done. On ctx
// Campaign withdraws our key itself, with the client's context, which
// blocks while etcd is unreachable; campaign then gives it
// etcdCallTimeout and leaves it behind (the caller revokes the lease, or
// it expires), so that Run still returns promptly.
func (e *Etcd) campaign(ctx context.Context, election *concurrency.Election) error {
	done := make(chan error, 1)
	go func() { done <- election.Campaign(ctx, e.self) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return err
	case <-time.After(etcdCallTimeout):
		return fmt.Errorf("campaign: %w (withdrawing the candidacy timed out)", ctx.Err())
	}
}

// lead runs one term. parent is done when ctx is or the session is.
func (e *Etcd) lead(ctx, parent context.Context, session *concurrency.Session, election *concurrency.Election,
	term Term, cb Callbacks) error {
	leadCtx, leadCancel := context.WithCancel(parent)
	defer leadCancel()
	e.setLeading(term, true, "elected")

	workDone := make(chan error, 1)
	go func() { workDone <- cb.OnStartedLeading(leadCtx, term) }()

	var workErr error
	returned := false
	select {
	case workErr = <-workDone:
		returned = true
	case <-leadCtx.Done():
	}
	reason := "leader work returned" // ifs, not a switch: see candidacy
	if returned {
		if store.IsFenced(workErr) {
			reason = "fenced"
		}
	} else if e.stopCtx.Err() != nil {
		reason = "resigned"
	} else if ctx.Err() != nil {
		reason = "shutting down"
	} else if isClosed(session.Done()) {
		reason = "lease lost"
	}
	leadCancel()
	e.setLeading(term, false, reason)
	rerr := e.resign(election)
	if rerr != nil {
		e.log.Warn("etcd election: could not resign; the leader key goes when the lease expires",
			"epoch", term.Epoch, "err", rerr, "ttl", time.Duration(e.ttl)*time.Second)
	}
	// We neither hold nor seek the key any more, even if the work has not
	// returned yet: a Resign need not wait for it.
	e.setLease(0)
	e.handOff(rerr)

	if !returned {
		workErr = e.waitWork(workDone, term)
	}
	var fenced *store.FencedError
	if errors.As(workErr, &fenced) {
		e.log.Error(fmt.Sprintf("fenced: stopping leadership, our epoch %d, fence epoch %d", fenced.Ours, fenced.Current),
			"our_epoch", fenced.Ours, "fence_epoch", fenced.Current, "fence_holder", fenced.Holder)
	}
	if cb.OnStoppedLeading != nil {
		cb.OnStoppedLeading(term, workErr)
	}
	if !returned || fenced != nil || ctx.Err() != nil {
		return nil
	}
	if workErr != nil {
		return fmt.Errorf("leader work of epoch %d failed: %w", term.Epoch, workErr)
	}
	return fmt.Errorf("leader work of epoch %d returned while still leading", term.Epoch)
}

// waitWork waits for leader work whose context was cancelled, warning
// every TTL while it ignores the cancellation.
func (e *Etcd) waitWork(workDone <-chan error, term Term) error {
	every := time.Duration(e.ttl) * time.Second
	t := time.NewTicker(every)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case err := <-workDone:
			return err
		case <-t.C:
			e.log.Warn("etcd election: leader work ignores the end of its term; this replica does not campaign again until it returns (its writes are fenced)",
				"epoch", term.Epoch, "waited", time.Since(start).Round(time.Millisecond))
		}
	}
}

// newSession grants a lease (with a timeout, so that an unreachable etcd is
// logged and retried) and keeps it alive until ctx is done or the session
// is closed.
func (e *Etcd) newSession(ctx context.Context) (*concurrency.Session, error) {
	gctx, cancel := context.WithTimeout(ctx, time.Duration(e.ttl)*time.Second)
	lease, err := e.cli.Grant(gctx, int64(e.ttl))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	s, err := concurrency.NewSession(e.cli, concurrency.WithLease(lease.ID),
		concurrency.WithTTL(e.ttl), concurrency.WithContext(ctx))
	if err != nil {
		e.revoke(lease.ID)
		return nil, fmt.Errorf("new session: %w", err)
	}
	return s, nil
}

// closeSession stops the keepalive and revokes the lease, which deletes any
// key the session still holds. Best effort: on failure the lease expires
// within the TTL.
func (e *Etcd) closeSession(s *concurrency.Session) {
	s.Orphan()
	e.revoke(s.Lease())
}

func (e *Etcd) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), etcdCallTimeout)
	defer cancel()
	if _, err := e.cli.Revoke(ctx, id); err != nil && ctx.Err() == nil {
		e.log.Debug("etcd election: revoke lease", "lease", fmt.Sprintf("%x", id), "err", err)
	}
}

// resign deletes our leader key, if we still hold it (best effort).
func (e *Etcd) resign(election *concurrency.Election) error {
	ctx, cancel := context.WithTimeout(context.Background(), etcdCallTimeout)
	defer cancel()
	return election.Resign(ctx)
}

// observe keeps Status().Leader current from the election's leader key,
// restarting Observe when its channel closes on an etcd error.
func (e *Etcd) observe(ctx context.Context, election *concurrency.Election) {
	for {
		for resp := range election.Observe(ctx) {
			if len(resp.Kvs) == 0 {
				continue
			}
			leader := string(resp.Kvs[0].Value)
			e.status.set(func(s *Status) {
				if s.Leading { // our term: Leader stays Self
					return
				}
				s.Leader = leader
				if leader == s.Self {
					s.Leader = "" // our key, but not (or no longer) our term
				}
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(observeRetry):
		}
	}
}

// setLeading records the start or end of a term in Status, the metrics and
// the log.
func (e *Etcd) setLeading(term Term, leading bool, reason string) {
	e.status.set(func(s *Status) {
		s.Leading, s.Epoch = leading, term.Epoch
		if leading {
			s.Leader = term.Holder
		} else if s.Leader == s.Self {
			s.Leader = ""
		}
	})
	if leading {
		e.block.clear("leading")
	}
	if e.m != nil {
		e.m.LeaderChanges.Inc()
		e.m.LeaderEpoch.Set(float64(term.Epoch))
		if leading {
			e.m.Leader.Set(1)
		} else {
			e.m.Leader.Set(0)
		}
	}
	if leading {
		e.log.Info("leading", "epoch", term.Epoch, "revision", term.Revision, "ttl", time.Duration(e.ttl)*time.Second)
	} else {
		e.log.Info("stopped leading", "epoch", term.Epoch, "reason", reason)
	}
}

// errNotLeader marks a won campaign whose session or leader key is no
// longer ours.
var errNotLeader = errors.New("not the leader")

// verifyOwnership reports whether this session holds the election's leader
// key right now: the session has not expired (session.Done() is open), and
// the first-created key under the prefix (election.Leader) is our key
// (election.Key()), with our create revision and our lease. Campaign
// returning is not proof of leadership (etcd #19597, docs/design.md §8): a session
// can expire while Campaign waits, and Campaign then returns once the older
// keys are deleted, although ours is gone too. It returns nil when we lead,
// an error wrapping errNotLeader when we do not, and another error when
// etcd could not be asked.
func verifyOwnership(ctx context.Context, session *concurrency.Session, election *concurrency.Election) error {
	if isClosed(session.Done()) {
		return fmt.Errorf("%w: session lease %x expired", errNotLeader, session.Lease())
	}
	key, rev := election.Key(), election.Rev()
	if key == "" {
		return fmt.Errorf("%w: the election holds no key", errNotLeader)
	}
	resp, err := election.Leader(ctx)
	if errors.Is(err, concurrency.ErrElectionNoLeader) {
		return fmt.Errorf("%w: no key under the election prefix (ours, %q, is gone)", errNotLeader, key)
	}
	if err != nil {
		return fmt.Errorf("read the leader key: %w", err)
	}
	kv := resp.Kvs[0]
	if string(kv.Key) != key || kv.CreateRevision != rev || clientv3.LeaseID(kv.Lease) != session.Lease() {
		return fmt.Errorf("%w: the leader key is %q (create revision %d, lease %x), ours is %q (create revision %d, lease %x)",
			errNotLeader, kv.Key, kv.CreateRevision, kv.Lease, key, rev, session.Lease())
	}
	if isClosed(session.Done()) {
		return fmt.Errorf("%w: session lease %x expired", errNotLeader, session.Lease())
	}
	return nil
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

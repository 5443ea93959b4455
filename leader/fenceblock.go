package leader

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vigil-sched/vigil/maintenance"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// fenceWatchInterval is how often a blocked replica re-reads the fence
// row to notice a reset or another replica's term.
const fenceWatchInterval = time.Second

// fenceBlock tracks whether the fence refuses this replica (Status
// FenceBlocked, vigil_leader_fence_blocked). set records a refusal and
// watches the fence row until it changes; clear ends the block.
type fenceBlock struct {
	store  *store.Store
	status *statusBox
	m      *metrics.Metrics
	log    *slog.Logger

	mu       sync.Mutex
	refused  *store.FenceState // the fence row that refused us; nil when not blocked
	watching bool
}

// blockReason renders a refusal for Status.FenceBlockedReason and the log.
func blockReason(fe *store.FencedError) string {
	f := fe.Fence
	return fmt.Sprintf("leader fence refuses %s revision %d: %s; the fence holds generation %d, domain %s, revision %d (holder %q). "+
		"If etcd was restored or replaced, or this database moved between Lite and Pro, stop and check every replica, then run `vigil fence reset --reason ... --yes`",
		fe.Domain, fe.Revision, fe.Refusal, f.Generation, f.Domain, f.Revision, f.Holder)
}

// set marks the replica blocked by fe (which must carry Fence) and, with
// watch, watches the fence row every fenceWatchInterval until it no longer
// equals fe.Fence or ctx ends; then the block clears. Without watch the
// caller clears it itself (Static, which keeps retrying).
func (b *fenceBlock) set(ctx context.Context, fe *store.FencedError, watch bool) {
	reason := blockReason(fe)
	b.mu.Lock()
	b.refused = fe.Fence
	start := !b.watching && watch
	b.watching = b.watching || start
	b.mu.Unlock()
	b.status.set(func(s *Status) { s.FenceBlocked, s.FenceBlockedReason = true, reason })
	if b.m != nil {
		b.m.LeaderFenceBlocked.Set(1)
	}
	b.log.Error("leadership blocked by the leader fence: nobody can lead until it is reset",
		"candidate_domain", fe.Domain, "candidate_revision", fe.Revision, "refusal", fe.Refusal,
		"fence_generation", fe.Fence.Generation, "fence_domain", fe.Fence.Domain.String(),
		"fence_revision", fe.Fence.Revision, "fence_holder", fe.Fence.Holder,
		"fix", "vigil fence show; vigil fence reset --reason TEXT --yes")
	if start {
		go b.watch(ctx)
	}
}

// clear ends the block, if any.
func (b *fenceBlock) clear(why string) {
	b.mu.Lock()
	was := b.refused != nil
	b.refused = nil
	b.mu.Unlock()
	b.status.set(func(s *Status) { s.FenceBlocked, s.FenceBlockedReason = false, "" })
	if b.m != nil {
		b.m.LeaderFenceBlocked.Set(0)
	}
	if was {
		b.log.Info("leader fence no longer blocks this replica", "why", why)
	}
}

// ServiceFenceWatch names the fence watch's maintenance service.
const ServiceFenceWatch = "fence_watch"

// watch runs the fence watch (watchOnce every fenceWatchInterval, the
// first after one interval) until the block clears or ctx ends.
func (b *fenceBlock) watch(ctx context.Context) {
	defer func() {
		b.mu.Lock()
		b.watching = false
		b.mu.Unlock()
	}()
	svc := maintenance.New(maintenance.Config{Name: ServiceFenceWatch, Interval: fenceWatchInterval,
		InitialDelay: fenceWatchInterval}, b.watchOnce)
	_ = maintenance.NewGroup(b.log, nil, svc).Run(ctx) // nil: watchOnce has no fatal error
}

// watchOnce re-reads the fence row while blocked; a changed row (a
// reset, or a term another replica took) ends the block. It returns
// maintenance.ErrFinished once there is no block left to watch; a failed
// read is retried at the next interval.
func (b *fenceBlock) watchOnce(ctx context.Context) error {
	b.mu.Lock()
	refused := b.refused
	b.mu.Unlock()
	if refused == nil {
		return maintenance.ErrFinished
	}
	cur, err := b.store.FenceState(ctx)
	if err != nil {
		return err
	}
	if cur.Generation != refused.Generation || cur.Domain != refused.Domain ||
		cur.Revision != refused.Revision || cur.Holder != refused.Holder {
		b.clear(fmt.Sprintf("the fence changed: generation %d, domain %s, revision %d, holder %q",
			cur.Generation, cur.Domain, cur.Revision, cur.Holder))
		return maintenance.ErrFinished
	}
	return nil
}

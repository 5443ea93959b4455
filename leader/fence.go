package leader

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/vigil-sched/vigil/store"
)

// Backoff between attempts to take the fence (adr/0010): short, because a
// lock timeout already waited store.LeaderTimeouts.Lock, and the older
// term's transaction ends within store.LeaderTimeouts.IdleInTransaction.
const (
	minFenceRetry = 100 * time.Millisecond
	maxFenceRetry = time.Second
)

// takeFence moves the fence to revision of domain for holder
// (store.AcquireFenceIn),
// retrying lock timeouts (store.IsLockTimeout) with a short backoff and a
// log line per retry until it succeeds or ctx ends. ctx must end when the
// caller stops holding its election (Pro: the etcd session), so that only
// the current election winner keeps trying.
//
// A lock timeout means an older term's leader transaction still holds the
// fence row FOR SHARE; PostgreSQL ends it at the latest
// store.LeaderTimeouts.IdleInTransaction after it went idle, and giving up
// the election would only hand the same wait to the next replica. Every
// other error is returned at once: a *store.FencedError is final (a newer
// epoch holds the fence), and on any other failure (this replica cannot
// reach PostgreSQL, say) the caller gives up its candidacy as before, so
// that a replica that can reach the database may lead. Once ctx ended it
// returns an error wrapping ctx.Err() and the last lock timeout.
//
// It returns the term's fencing token (store.AcquireFenceIn: the fence's
// generation and revision of domain).
func takeFence(ctx context.Context, st *store.Store, domain store.FenceDomain, revision int64, holder string,
	log *slog.Logger) (int64, error) {
	backoff := minFenceRetry
	for attempt := 1; ; attempt++ {
		token, err := st.AcquireFenceIn(ctx, domain, revision, holder)
		if !store.IsLockTimeout(err) {
			return token, err
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("take fence %s revision %d: %w (last attempt: %v)", domain, revision, ctx.Err(), err)
		}
		log.Warn("leader fence still locked by an older term's transaction; retrying until PostgreSQL ends it",
			"domain", domain, "revision", revision, "attempt", attempt, "backoff", backoff, "err", err,
			"idle_timeout", st.LeaderTimeouts().IdleInTransaction)
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("take fence %s revision %d: %w (last attempt: %v)", domain, revision, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxFenceRetry)
	}
}

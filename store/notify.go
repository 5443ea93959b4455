package store

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listener holds one dedicated connection that LISTENs on Vigil's wake
// channels and fans each notification out to subscribers (docs/design.md §5: the
// loop wakes on LISTEN/NOTIFY, not only on its tick).
//
// Delivery is a hint, not a guarantee: subscribers must still poll on a
// timer, because notifications sent while the connection is down are lost.
// After a reconnect every subscriber is woken once to cover that gap.
type Listener struct {
	url    string
	log    *slog.Logger
	mu     sync.Mutex
	subs   map[string]map[chan struct{}]func(payload string) bool
	cancel context.CancelFunc
	done   chan struct{}
}

// Listen starts a Listener on channels; it reconnects on its own until
// Close. The logger may be nil.
func (s *Store) Listen(ctx context.Context, log *slog.Logger, channels ...string) *Listener {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &Listener{url: s.url, log: log, subs: map[string]map[chan struct{}]func(string) bool{}, cancel: cancel, done: make(chan struct{})}
	go l.run(ctx, channels)
	return l
}

// Subscribe returns a channel that receives a value (coalesced: capacity
// 1, never blocks the listener) after each notification on channel, and a
// function that unsubscribes.
func (l *Listener) Subscribe(channel string) (<-chan struct{}, func()) {
	return l.SubscribeFunc(channel, nil)
}

// SubscribeFunc is Subscribe woken only by the notifications whose
// payload match accepts (nil accepts all). The wake-up after a reconnect
// reaches every subscriber whatever its match: notifications may have
// been lost meanwhile.
func (l *Listener) SubscribeFunc(channel string, match func(payload string) bool) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	if l.subs[channel] == nil {
		l.subs[channel] = map[chan struct{}]func(string) bool{}
	}
	l.subs[channel][ch] = match
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		delete(l.subs[channel], ch)
		l.mu.Unlock()
	}
}

// Subscribers reports how many subscriptions channel has now: a test
// waits for a long poll to be listening before it notifies.
func (l *Listener) Subscribers(channel string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.subs[channel])
}

// Close stops the listener and waits for its goroutine.
func (l *Listener) Close() {
	l.cancel()
	<-l.done
}

// wake signals the subscribers of channel whose match accepts payload;
// channel "" signals every subscriber of every channel.
func (l *Listener) wake(channel, payload string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, set := range l.subs {
		if channel != "" && name != channel {
			continue
		}
		for ch, match := range set {
			if channel != "" && match != nil && !match(payload) {
				continue
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (l *Listener) run(ctx context.Context, channels []string) {
	defer close(l.done)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listenOnce(ctx, channels)
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("notification listener disconnected; reconnecting", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}

func (l *Listener) listenOnce(ctx context.Context, channels []string) error {
	conn, err := pgx.Connect(ctx, l.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, c := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{c}.Sanitize()); err != nil {
			return err
		}
	}
	l.wake("", "") // anything sent while we were down is lost: let everyone poll once
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		l.wake(n.Channel, n.Payload)
	}
}

// Wake channels for LISTEN/NOTIFY (docs/design.md §5).
const (
	// ChanScheduler wakes the scheduler loop: a TI finished, a run was
	// triggered or cancelled.
	ChanScheduler = "vigil_scheduler"
	// ChanQueued wakes claim long-polls: TIs were queued.
	ChanQueued = "vigil_queued"
	// ChanStop wakes an agent's stop watch (POST
	// /v1/agents/{id}/stops): a TI it runs was cancelled, so its next
	// heartbeat carries a stop order. The payload is the agent's id.
	ChanStop = "vigil_stop"
)

// ChanReap asks the leader for an immediate reaper sweep (vigil reap on a
// follower replica).
const ChanReap = "vigil_reap"

// RequestSweep notifies the leader, wherever it runs, to sweep now.
func (s *Store) RequestSweep(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `SELECT pg_notify($1, 'sweep')`, ChanReap)
	return err
}

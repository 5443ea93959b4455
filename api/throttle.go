package api

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// SignInLimit throttles sign-in (docs/security.md, "Sign-in"):
// POST /v1/session needs no token, so anyone who reaches the API could
// try tokens at the speed of the network. Each client address gets a
// token bucket of Burst attempts, refilled one per Every.
type SignInLimit struct {
	Burst int
	Every time.Duration
}

// DefaultSignInLimit: a person who mistypes a token is never held up, a
// guesser gets 20 tries a minute per address.
var DefaultSignInLimit = SignInLimit{Burst: 20, Every: 3 * time.Second}

// withDefaults fills the zero fields from DefaultSignInLimit.
func (l SignInLimit) withDefaults() SignInLimit {
	if l.Burst <= 0 {
		l.Burst = DefaultSignInLimit.Burst
	}
	if l.Every <= 0 {
		l.Every = DefaultSignInLimit.Every
	}
	return l
}

// maxThrottled bounds the addresses remembered: beyond it, those whose
// bucket is full again are forgotten first, so many addresses cost a
// bounded amount of memory.
const maxThrottled = 10000

// throttle is a token bucket per client address (golang.org/x/time/rate,
// adr/0029). It is safe for concurrent use.
type throttle struct {
	mu      sync.Mutex
	every   time.Duration
	burst   int
	max     int
	clients map[string]*rate.Limiter
}

func newThrottle(l SignInLimit, maxClients int) *throttle {
	return &throttle{every: l.Every, burst: l.Burst, max: maxClients, clients: map[string]*rate.Limiter{}}
}

// allow takes one attempt from addr's bucket at now; when it is empty it
// returns false and how long until the next attempt is allowed.
func (t *throttle) allow(addr string, now time.Time) (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lim, ok := t.clients[addr]
	if !ok {
		if len(t.clients) >= t.max {
			t.forget(now)
		}
		lim = rate.NewLimiter(rate.Every(t.every), t.burst)
		t.clients[addr] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// forget drops the addresses whose bucket is full at now (they lose
// nothing by being forgotten); if none is, it drops one at random, so a
// flood of new addresses cannot grow the map.
func (t *throttle) forget(now time.Time) {
	for addr, lim := range t.clients {
		if lim.TokensAt(now) >= float64(t.burst) {
			delete(t.clients, addr)
		}
	}
	for addr := range t.clients {
		if len(t.clients) < t.max {
			break
		}
		delete(t.clients, addr)
	}
}

// clientAddr is the address a request came from, without its port. Behind
// a reverse proxy it is the proxy's: Vigil trusts no forwarded header.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

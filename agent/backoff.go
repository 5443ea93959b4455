package agent

import (
	"math"
	"math/rand/v2"
	"time"
)

// Reconnect backoff parameters (docs/design.md §4, KiCI agent reconnection).
const (
	backoffBase   = time.Second
	backoffFactor = 1.5
	backoffJitter = 0.2 // ±20%
	backoffMax    = 60 * time.Second
)

// backoff yields exponentially growing, jittered delays: the n-th call to
// Next (from 0) returns Base×Factor^n, capped at Max, scaled by a uniform
// factor in [1−Jitter, 1+Jitter], and capped at Max again so no delay ever
// exceeds it. Jitter spreads the reconnects of many agents after a control
// plane restart. Not safe for concurrent use.
type backoff struct {
	Base   time.Duration
	Factor float64
	Jitter float64
	Max    time.Duration
	// Rand returns a float in [0, 1); nil uses math/rand/v2.
	Rand func() float64

	n int
}

// newBackoff returns the reconnect policy: 1 s, ×1.5, ±20%, 60 s cap.
func newBackoff() *backoff {
	return &backoff{Base: backoffBase, Factor: backoffFactor, Jitter: backoffJitter, Max: backoffMax}
}

// Next returns the next delay and advances the sequence.
func (b *backoff) Next() time.Duration {
	d := float64(b.Base) * math.Pow(b.Factor, float64(b.n))
	if d >= float64(b.Max) {
		d = float64(b.Max)
	} else {
		b.n++ // stop growing at the cap: no overflow on long outages
	}
	r := rand.Float64
	if b.Rand != nil {
		r = b.Rand
	}
	d *= 1 + b.Jitter*(2*r()-1)
	return min(time.Duration(d), b.Max)
}

// Reset restarts the sequence at Base.
func (b *backoff) Reset() { b.n = 0 }

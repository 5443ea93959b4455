// Package retry is Vigil's retry policy for task instances: how many tries a
// TI gets and how long it waits between them. It is a leaf of pure logic:
// the store applies it to completions and the reapers' candidates carry
// it, so neither the store nor the reapers depend on the scheduler.
//
// Source: Airflow's retries / retry_delay / retry_exponential_backoff /
// max_retry_delay semantics, docs/design.md §5 step 4.
package retry

import "time"

// Policy is the retry configuration of one task. Retries is the number of
// extra tries after the first (0 = never retry). Delay is the wait before a
// retry; with Exponential it doubles per failed try, capped at MaxDelay.
type Policy struct {
	Retries     int
	Delay       time.Duration
	Exponential bool
	MaxDelay    time.Duration
}

// DefaultMaxDelay caps exponential back-off when a task sets no
// max_retry_delay.
const DefaultMaxDelay = time.Hour

// Next reports whether a TI whose try number tryNumber (1-based: the try
// that just failed) may be retried, and the delay before the retry.
// tryNumber ≤ Retries means budget remains.
func (p Policy) Next(tryNumber int) (retry bool, delay time.Duration) {
	if tryNumber > p.Retries {
		return false, 0
	}
	delay = p.Delay
	if p.Exponential && tryNumber > 1 {
		maxDelay := p.MaxDelay
		if maxDelay <= 0 {
			maxDelay = DefaultMaxDelay
		}
		for i := 1; i < tryNumber && delay < maxDelay; i++ {
			delay *= 2
		}
		if delay > maxDelay {
			delay = maxDelay
		}
	}
	return true, delay
}

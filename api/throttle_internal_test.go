package api

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The per-address bucket: a burst, then one attempt per interval, on a
// stepped clock; addresses are independent; the map stays bounded.
func TestThrottlePerAddress(t *testing.T) {
	th := newThrottle(SignInLimit{Burst: 2, Every: 3 * time.Second}, 3)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2 {
		ok, _ := th.allow("10.0.0.1", t0)
		assert.True(t, ok, "attempt %d of the burst", i+1)
	}
	ok, wait := th.allow("10.0.0.1", t0)
	assert.False(t, ok, "past the burst")
	assert.Equal(t, 3*time.Second, wait)
	ok, _ = th.allow("10.0.0.2", t0)
	assert.True(t, ok, "another address has its own bucket")

	ok, wait = th.allow("10.0.0.1", t0.Add(2*time.Second))
	assert.False(t, ok)
	assert.Equal(t, time.Second, wait, "a refused attempt does not push the next one back")
	ok, _ = th.allow("10.0.0.1", t0.Add(3*time.Second))
	assert.True(t, ok, "one attempt per interval after the burst")

	for i := range 10 {
		th.allow(fmt.Sprintf("10.1.0.%d", i), t0.Add(4*time.Second))
		assert.LessOrEqual(t, len(th.clients), 3)
	}
}

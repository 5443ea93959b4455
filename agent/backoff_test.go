package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBackoffSequenceWithoutJitter(t *testing.T) {
	t.Parallel()
	b := newBackoff()
	b.Rand = func() float64 { return 0.5 } // factor 1: no jitter
	want := []time.Duration{
		time.Second, 1500 * time.Millisecond, 2250 * time.Millisecond, 3375 * time.Millisecond,
	}
	for i, w := range want {
		assert.Equal(t, w, b.Next(), "step %d", i)
	}
	for range 20 {
		b.Next()
	}
	assert.Equal(t, 60*time.Second, b.Next(), "capped")
	b.Reset()
	assert.Equal(t, time.Second, b.Next())
}

func TestBackoffJitterBounds(t *testing.T) {
	t.Parallel()
	low, high := newBackoff(), newBackoff()
	low.Rand = func() float64 { return 0 }
	high.Rand = func() float64 { return 0.999999 }
	assert.Equal(t, 800*time.Millisecond, low.Next(), "-20%")
	assert.InDelta(t, float64(1200*time.Millisecond), float64(high.Next()), float64(time.Millisecond), "+20%")
	for range 30 {
		low.Next()
		high.Next()
	}
	assert.Equal(t, 48*time.Second, low.Next(), "cap with -20%")
	assert.Equal(t, 60*time.Second, high.Next(), "jitter never exceeds the cap")
}

func TestBackoffRandomStaysInRange(t *testing.T) {
	t.Parallel()
	b := newBackoff()
	for i := range 100 {
		d := b.Next()
		assert.GreaterOrEqual(t, d, 800*time.Millisecond, "step %d", i)
		assert.LessOrEqual(t, d, 60*time.Second, "step %d", i)
	}
}

package agent

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRingDropsOldestAndCounts(t *testing.T) {
	t.Parallel()
	r := newRing[int](3)
	for i := 1; i <= 3; i++ {
		_, evicted := r.Push(i)
		assert.False(t, evicted)
	}
	old, evicted := r.Push(4)
	assert.True(t, evicted)
	assert.Equal(t, 1, old)
	r.Push(5)
	assert.Equal(t, 3, r.Len())
	assert.Equal(t, uint64(2), r.Dropped())
	batch, first := r.Peek(10)
	assert.Equal(t, []int{3, 4, 5}, batch)
	assert.Equal(t, uint64(2), first, "absolute index of 3 (0 and 1 were evicted)")
	assert.Equal(t, uint64(5), r.End())
}

func TestRingDiscardAfterConcurrentEviction(t *testing.T) {
	t.Parallel()
	r := newRing[int](4)
	for i := range 4 {
		r.Push(i)
	}
	batch, first := r.Peek(2) // a sender takes [0 1]
	require.Equal(t, []int{0, 1}, batch)
	r.Push(4) // evicts 0 while the batch is in flight
	r.Push(5) // evicts 1
	assert.Equal(t, 0, r.DiscardBefore(first+uint64(len(batch))), "both already evicted")
	v, idx, ok := r.Front()
	require.True(t, ok)
	assert.Equal(t, 2, v)
	assert.Equal(t, uint64(2), idx)
	assert.Equal(t, 2, r.DiscardBefore(idx+2))
	rest, _ := r.Peek(10)
	assert.Equal(t, []int{4, 5}, rest)
}

func TestRingCompactionKeepsOrder(t *testing.T) {
	t.Parallel()
	r := newRing[int](5)
	next, want := 0, 0
	for round := 0; round < 1000; round++ {
		for range 3 {
			r.Push(next)
			next++
		}
		v, idx, ok := r.Front()
		require.True(t, ok)
		want = max(want, next-5) // evicted entries are skipped
		require.Equal(t, want, v)
		require.Equal(t, uint64(want), idx)
		r.DiscardBefore(idx + 1)
		want++
		require.LessOrEqual(t, cap(r.items), 16, "memory stays bounded")
	}
	assert.Equal(t, uint64(next), r.End())
}

func TestRingEmpty(t *testing.T) {
	t.Parallel()
	r := newRing[string](0) // clamped to 1
	_, _, ok := r.Front()
	assert.False(t, ok)
	batch, first := r.Peek(5)
	assert.Empty(t, batch)
	assert.Equal(t, uint64(0), first)
	r.Push("a")
	r.Push("b")
	assert.Equal(t, 1, r.Len())
	assert.Equal(t, uint64(1), r.Dropped())
}

func TestRingAll(t *testing.T) {
	t.Parallel()
	r := newRing[int](3)
	for i := range 5 {
		r.Push(i)
	}
	var got []int
	for v := range r.All() {
		got = append(got, v)
		if v == 3 {
			break
		}
	}
	assert.Equal(t, []int{2, 3}, got)
}

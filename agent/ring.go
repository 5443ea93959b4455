package agent

import "iter"

// ring is a bounded FIFO that drops its oldest entry when a push would
// exceed the limit, and counts the drops (docs/design.md §4, KiCI agent
// reconnection: "oldest dropped first, with a drop count").
//
// Every entry has an absolute index that increases by one per push and never
// repeats. A sender peeks a batch, sends it without holding any lock, and
// then discards up to the batch's end: if pushes evicted part of the batch
// meanwhile, the discard is still exact. ring is not safe for concurrent use.
type ring[T any] struct {
	items   []T // items[off:] are live, oldest first
	off     int
	limit   int
	head    uint64 // absolute index of items[off]
	dropped uint64
}

// newRing returns an empty ring holding at most limit entries (limit ≥ 1).
func newRing[T any](limit int) *ring[T] {
	if limit < 1 {
		limit = 1
	}
	return &ring[T]{limit: limit}
}

// Len is the number of live entries.
func (r *ring[T]) Len() int { return len(r.items) - r.off }

// Dropped is the total number of entries evicted by pushes into a full ring.
func (r *ring[T]) Dropped() uint64 { return r.dropped }

// End is the absolute index the next pushed entry will get; once an entry
// is discarded or evicted, every index below it stays gone.
func (r *ring[T]) End() uint64 { return r.head + uint64(r.Len()) }

// Head is the absolute index of the oldest live entry (End when empty).
func (r *ring[T]) Head() uint64 { return r.head }

// All yields the live entries, oldest first. The ring must not change
// during the iteration.
func (r *ring[T]) All() iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, v := range r.items[r.off:] {
			if !yield(v) {
				return
			}
		}
	}
}

// Push appends v. When the ring is full it first evicts the oldest entry,
// returning it with evicted true.
func (r *ring[T]) Push(v T) (old T, evicted bool) {
	if r.Len() == r.limit {
		old = r.items[r.off]
		r.popFront()
		r.dropped++
		evicted = true
	}
	r.items = append(r.items, v)
	return old, evicted
}

// Front returns the oldest entry and its absolute index.
func (r *ring[T]) Front() (v T, idx uint64, ok bool) {
	if r.Len() == 0 {
		return v, r.head, false
	}
	return r.items[r.off], r.head, true
}

// Peek copies up to max of the oldest entries and returns the absolute index
// of the first one. Pass first+len(batch) to DiscardBefore once sent.
func (r *ring[T]) Peek(max int) (batch []T, first uint64) {
	n := min(max, r.Len())
	batch = make([]T, n)
	copy(batch, r.items[r.off:r.off+n])
	return batch, r.head
}

// DiscardBefore removes the live entries whose absolute index is below end
// and returns how many it removed. Entries already evicted are skipped.
func (r *ring[T]) DiscardBefore(end uint64) int {
	n := 0
	for r.Len() > 0 && r.head < end {
		r.popFront()
		n++
	}
	return n
}

func (r *ring[T]) popFront() {
	var zero T
	r.items[r.off] = zero // release references for the GC
	r.off++
	r.head++
	// Compact once the dead prefix is at least half the slice, so memory
	// stays within about twice the limit and each entry moves O(1) times.
	if r.off*2 >= len(r.items) {
		n := copy(r.items, r.items[r.off:])
		clear(r.items[n:])
		r.items = r.items[:n]
		r.off = 0
	}
}

// Package reapertest provides a stepped reaper.Clock for tests, so they
// move time without sleeping (docs/design.md §11).
package reapertest

import (
	"context"
	"sync"
	"time"
)

// Clock is a reaper.Clock whose time only moves when told. Safe for
// concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
	err error
}

// NewClock returns a Clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now implements reaper.Clock; it fails only while Fail has set an error.
func (c *Clock) Now(context.Context) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now, c.err
}

// Fail makes Now return err until Fail(nil): an unreachable database.
func (c *Clock) Fail(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

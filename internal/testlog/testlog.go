// Package testlog is a log sink for tests: a buffer that the goroutines
// of a server or an elector may write to while the test reads it.
package testlog

import (
	"strings"
	"sync"
)

// Buffer collects what is written to it; safe for concurrent use. The
// zero value is ready.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

package reaper

import "context"

// RunOnceForTest runs one pass of s (runOnce). Test builds only.
func (s *Service) RunOnceForTest(ctx context.Context) error { return s.runOnce(ctx) }

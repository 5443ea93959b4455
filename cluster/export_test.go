package cluster

import (
	"context"
	"time"
)

// RunOnceForTest runs one pass of p's service (runOnce). Test builds only.
func (p *Publisher) RunOnceForTest(ctx context.Context) error { return p.runOnce(ctx) }

// ConfigForTest is p's Config after the defaults. Test builds only.
func (p *Publisher) ConfigForTest() Config { return p.cfg }

// StartedForTest is the started_at p publishes. Test builds only.
func (p *Publisher) StartedForTest() time.Time { return p.started }

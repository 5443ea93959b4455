package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// TestRunsShowWatch: runs show --watch redraws when
// a state changes, not on every poll, and ends with the run.
func TestRunsShowWatch(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	queued := fakeRunDetail("queued", fakeTI("extract", "none"))
	running := fakeRunDetail("running", fakeTI("extract", "running"))
	done := fakeRunDetail("success", fakeTI("extract", "success"))
	f.sequence("GET /v1/runs/12", queued, queued, running, running, running, done)
	r := runCLI(t, append([]string{"runs", "show", "12", "--watch", "--watch-interval", "100ms"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	frames := strings.Split(strings.TrimSpace(r.stdout), "\n\n\n") // a frame has a blank line inside
	assert.Equal(t, 3, strings.Count(r.stdout, "Run:"), "one frame per change:\n%s", r.stdout)
	assert.Len(t, f.requestLog(), 6, "polled until the run ended")
	assert.Contains(t, frames[len(frames)-1], "State:     success")

	r = runCLI(t, append([]string{"runs", "show", "12", "--watch", "--watch-interval", "1ms"}, f.serverArgs()...)...)
	assert.Equal(t, exitUsage, r.code)
	assert.ErrorContains(t, r.err, "--watch-interval")
}

// TestRunsListWatch: runs list --watch redraws on a change and ends
// cleanly (exit 0) when interrupted.
func TestRunsListWatch(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	one := protocol.RunList{Runs: []protocol.Run{fakeQueuedRun()}}
	r2 := fakeQueuedRun()
	r2.State = "running"
	two := protocol.RunList{Runs: []protocol.Run{r2}}
	f.sequence("GET /v1/runs", one, one, two)
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	root := newRootCmd()
	root.SetArgs(append([]string{"runs", "list", "--watch", "--watch-interval", "100ms", "-o", "json"}, f.serverArgs()...))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	require.NoError(t, execute(ctx, root), "an interrupted watch is not an error")
	assert.Equal(t, 2, strings.Count(out.String(), `"runs"`), "two frames, one per change:\n%s", out.String())
	assert.Greater(t, len(f.requestLog()), 3, "kept polling")
}

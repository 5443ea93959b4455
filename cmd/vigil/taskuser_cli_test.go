package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTaskUserNeedsRoot: without root, --task-user and
// --task-users-allowed are refused at start, once, naming the flag.
func TestTaskUserNeedsRoot(t *testing.T) {
	clearClientEnv(t)
	geteuid = func() int { return 1000 }
	t.Cleanup(func() { geteuid = os.Geteuid })
	for flag, args := range map[string][]string{
		"--task-user":          {"agent", "--server", "http://127.0.0.1:1", "--token", "0123456789abcdef", "--task-user", "nobody"},
		"--task-users-allowed": {"agent", "--server", "http://127.0.0.1:1", "--token", "0123456789abcdef", "--task-users-allowed", "nobody"},
	} {
		r := runCLI(t, args...)
		assert.Equal(t, exitUsage, r.code, flag)
		require.Error(t, r.err, flag)
		assert.Equal(t, flag+": running tasks as another OS user needs root (the task supervisor switches user with setuid), "+
			"and vigil runs as uid 1000: run it as root, or leave "+flag+" out", r.err.Error())
	}
}

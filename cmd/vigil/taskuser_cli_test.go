package main

import (
	"os"
	"path/filepath"
	"strings"
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

// TestAgentTokensFileErrorsAtStart: a bad agent tokens file stops Lite
// at start, before the database, naming the flag, the file, the entry
// and the field.
func TestAgentTokensFileErrorsAtStart(t *testing.T) {
	base := liteBase(t)
	path := filepath.Join(t.TempDir(), "agent-tokens.yaml")
	require.NoError(t, os.WriteFile(path, []byte("- name: gpu-pool\n  token_sha256: "+strings.Repeat("ab", 32)+"\n  tags: []\n"), 0o600))
	r := runCLI(t, append(base, "--agent-tokens-file", path)...)
	assert.Equal(t, exitUsage, r.code)
	require.Error(t, r.err)
	assert.Equal(t, "--agent-tokens-file: agent tokens file "+path+`: entry 1 ("gpu-pool"): tags: required: the list of tags this token may register (the plain --agent-token serves all tags)`, r.err.Error())
}

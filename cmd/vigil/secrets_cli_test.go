package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeSecret writes content to a 0600 file in a temp dir.
func writeSecret(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// Secrets out of the process list: --token-file (and
// VIGIL_TOKEN_FILE) gives the CLI its token from a file.
func TestClientTokenFile(t *testing.T) {
	clearClientEnv(t)
	f := dagsFake(t)
	r := runCLI(t, "dags", "list", "--server", f.URL, "--token-file", writeSecret(t, fakeToken+"\n"))
	require.NoError(t, r.err)
	t.Setenv("VIGIL_TOKEN_FILE", writeSecret(t, "  "+fakeToken+"\r\n"))
	r = runCLI(t, "dags", "list", "--server", f.URL)
	require.NoError(t, r.err)
	assert.Equal(t, []string{"Bearer " + fakeToken, "Bearer " + fakeToken}, f.authLog(), "the file's one line, trimmed")
}

// Every secret flag has a -file twin; its errors name the flag and the
// file, and exit 2.
func TestSecretFileErrorsNameFlagAndFile(t *testing.T) {
	clearClientEnv(t)
	missing := filepath.Join(t.TempDir(), "nope")
	empty := writeSecret(t, "\n")
	twoLines := writeSecret(t, "abc\ndef\n")
	good := writeSecret(t, "s3cret\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"agent: missing file", []string{"agent", "--server", "http://127.0.0.1:1", "--token-file", missing},
			"--token-file " + missing + ": no such file or directory"},
		{"agent: both", []string{"agent", "--server", "http://127.0.0.1:1", "--token", "x", "--token-file", good},
			"--token and --token-file: give one or the other, not both"},
		{"client: empty file", []string{"dags", "list", "--server", "http://127.0.0.1:1", "--token-file", empty},
			"--token-file " + empty + ": the file is empty"},
		{"lite: two lines", []string{"lite", "--agent-token-file", twoLines},
			"--agent-token-file " + twoLines + ": the secret must be one line"},
		{"lite: operator token both ways", []string{"lite", "--operator-token", "o", "--operator-token-file", good},
			"--operator-token and --operator-token-file: give one or the other"},
		{"lite: viewer token both ways", []string{"lite", "--viewer-token", "v", "--viewer-token-file", good},
			"--viewer-token and --viewer-token-file: give one or the other"},
		{"server: viewer token is the operator's", []string{"server", "--database-url", "postgres://x", "--etcd-endpoints", "x:2379",
			"--agent-token", "a", "--operator-token", "s3cret", "--viewer-token-file", good},
			"--viewer-token: must differ from --operator-token and --agent-token"},
		{"server: a directory", []string{"server", "--database-url", "postgres://x", "--etcd-endpoints", "x:2379",
			"--agent-token", "a", "--operator-token", "o", "--etcd-password-file", filepath.Dir(good)},
			"--etcd-password-file " + filepath.Dir(good) + ": is a directory"},
	}
	for _, c := range cases {
		r := runCLI(t, c.args...)
		require.Error(t, r.err, c.name)
		assert.Equal(t, exitUsage, r.code, "%s: %v", c.name, r.err)
		assert.Contains(t, r.err.Error(), c.want, c.name)
	}
}

// The control-plane token files fill --agent-token and --operator-token,
// so vigil server's "both required" check passes with files alone.
func TestServerTokenFilesSatisfyRequiredTokens(t *testing.T) {
	clearClientEnv(t)
	r := runCLI(t, "server", "--database-url", "postgres://x", "--etcd-endpoints", "x:2379",
		"--agent-token-file", writeSecret(t, "agent-secret\n"), "--operator-token-file", writeSecret(t, "operator-secret\n"),
		"--heartbeat-interval", "0s")
	require.Error(t, r.err)
	assert.NotContains(t, r.err.Error(), "both are required", "the files count as the tokens")
	assert.Contains(t, r.err.Error(), "--heartbeat-interval")
}

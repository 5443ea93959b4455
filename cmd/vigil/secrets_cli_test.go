package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
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
	good := writeSecret(t, "s3cret-s3cret-s3cret\n")
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
			"--agent-token", "agent-token-0123456789", "--operator-token", "s3cret-s3cret-s3cret", "--viewer-token-file", good},
			"--viewer-token: must differ from --operator-token and --agent-token"},
		{"server: a directory", []string{"server", "--database-url", "postgres://x", "--etcd-endpoints", "x:2379",
			"--agent-token", "agent-token-0123456789", "--operator-token", "operator-token-0123456789", "--etcd-password-file", filepath.Dir(good)},
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
		"--agent-token-file", writeSecret(t, "agent-secret-0123456789\n"), "--operator-token-file", writeSecret(t, "operator-secret-0123456789\n"),
		"--heartbeat-interval", "0s")
	require.Error(t, r.err)
	assert.NotContains(t, r.err.Error(), "both are required", "the files count as the tokens")
	assert.Contains(t, r.err.Error(), "--heartbeat-interval")
}

// A token file group or others may read is refused at start, naming the
// file, and so is a token of fewer than 16 characters, naming the flag
// or the file it came from.
func TestTokenFileModeAndLength(t *testing.T) {
	clearClientEnv(t)
	open := writeSecret(t, "agent-token-0123456789\n")
	require.NoError(t, os.Chmod(open, 0o644))
	groupRead := writeSecret(t, "agent-token-0123456789\n")
	require.NoError(t, os.Chmod(groupRead, 0o640))
	short := writeSecret(t, "short-token\n")
	server := []string{"server", "--database-url", "postgres://x", "--etcd-endpoints", "x:2379"}
	// Should a check be missing, Lite must still start nothing here.
	lite := []string{"lite", "--database-url", "postgres://127.0.0.1:1/none", "--data-dir", t.TempDir()}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"lite: 0644 token file", append(lite, "--agent-token-file", open),
			"--agent-token-file " + open + ": mode 0644 lets group or others reach the secret; run chmod 600 " + open},
		{"server: 0640 token file", append(server, "--agent-token-file", groupRead, "--operator-token", "operator-token-0123456789"),
			"--agent-token-file " + groupRead + ": mode 0640 lets group or others"},
		{"agent: 0644 token file", []string{"agent", "--server", "http://127.0.0.1:1", "--token-file", open},
			"--token-file " + open + ": mode 0644"},
		{"server: short token file", append(server, "--agent-token-file", short, "--operator-token", "operator-token-0123456789"),
			"--agent-token-file " + short + ": the token has 11 characters, fewer than the 16 a token must have"},
		{"lite: short operator token", append(lite, "--operator-token", "fifteen-chars-x"),
			"--operator-token: the token has 15 characters, fewer than the 16"},
		{"lite: short viewer token", append(lite, "--viewer-token", "v"),
			"--viewer-token: the token has 1 characters"},
	}
	for _, c := range cases {
		r := runCLI(t, c.args...)
		require.Error(t, r.err, c.name)
		assert.Equal(t, exitUsage, r.code, "%s: %v", c.name, r.err)
		assert.Contains(t, r.err.Error(), c.want, c.name)
	}
}

// modeInfo is a FileInfo of a given mode, owner and group.
type modeInfo struct {
	fs.FileInfo
	mode     fs.FileMode
	uid, gid int
}

func (m modeInfo) Mode() fs.FileMode { return m.mode }
func (m modeInfo) Sys() any          { return &syscall.Stat_t{Uid: uint32(m.uid), Gid: uint32(m.gid)} }

// The one group-readable layout allowed is Kubernetes' fsGroup: another
// user's file, in our group, which the group may only read.
func TestSecretModeAllowsOnlyTheFSGroupLayout(t *testing.T) {
	me, other, ours := os.Geteuid(), os.Geteuid()+1000, os.Getegid()
	for _, c := range []struct {
		info modeInfo
		ok   bool
	}{
		{modeInfo{mode: 0o600, uid: me, gid: ours}, true},
		{modeInfo{mode: 0o400, uid: me, gid: ours}, true},
		{modeInfo{mode: 0o440, uid: other, gid: ours}, true},  // fsGroup
		{modeInfo{mode: 0o040, uid: other, gid: ours}, true},  // fsGroup, read by group only
		{modeInfo{mode: 0o440, uid: me, gid: ours}, false},    // ours: the group read is needless
		{modeInfo{mode: 0o460, uid: other, gid: ours}, false}, // group may write
		{modeInfo{mode: 0o444, uid: other, gid: ours}, false}, // others may read
		{modeInfo{mode: 0o440, uid: other, gid: ours + 4242}, false},
	} {
		err := checkSecretMode("--token-file", "/f", c.info)
		assert.Equal(t, c.ok, err == nil, "%+v: %v", c.info, err)
	}
}

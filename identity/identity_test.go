package identity

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParseNamesFileEntryAndField: each rule's error names the file, the
// entry and the field.
func TestParseNamesFileEntryAndField(t *testing.T) {
	h := SumHex("a")
	for want, body := range map[string]string{
		`users file f.yaml: entry 1: name: required`:                                "- role: viewer\n  token_sha256: " + h + "\n",
		`users file f.yaml: entry 1 ("al"): role: required`:                         "- name: al\n  token_sha256: " + h + "\n",
		`users file f.yaml: entry 1 ("al"): role: "root" is not a role`:             "- name: al\n  role: root\n  token_sha256: " + h + "\n",
		`users file f.yaml: entry 1 ("al"): token_sha256: must be 64 hex digits`:    "- name: al\n  role: admin\n  token_sha256: abc\n",
		`users file f.yaml: entry 1 ("operator"): name: "operator" is reserved`:     "- name: operator\n  role: admin\n  token_sha256: " + h + "\n",
		`users file f.yaml: entry 2 ("al"): name: also the name of entry 1`:         "- name: al\n  role: viewer\n  token_sha256: " + h + "\n- name: al\n  role: viewer\n  token_sha256: " + SumHex("b") + "\n",
		`users file f.yaml: entry 2 ("bo"): token_sha256: also the hash of entry 1`: "- name: al\n  role: viewer\n  token_sha256: " + h + "\n- name: bo\n  role: admin\n  token_sha256: " + h + "\n",
		`users file f.yaml: yaml: unmarshal errors:`:                                "- name: al\n  token: x\n",
		`users file f.yaml: no entries`:                                             "",
	} {
		_, err := Parse("f.yaml", []byte(body))
		require.Error(t, err, want)
		assert.Contains(t, err.Error(), want)
	}
}

// TestRolesIncludeTheOnesBefore: admin includes operator includes viewer,
// and no role includes a higher one or an unknown one.
func TestRolesIncludeTheOnesBefore(t *testing.T) {
	assert.True(t, Admin.Includes(Operator))
	assert.True(t, Admin.Includes(Viewer))
	assert.True(t, Operator.Includes(Viewer))
	assert.True(t, Operator.Includes(Operator))
	assert.False(t, Operator.Includes(Admin))
	assert.False(t, Viewer.Includes(Operator))
	assert.False(t, Role("").Includes(Viewer))
	assert.False(t, Admin.Includes(Role("root")))
}

// TestWatchRereadsAndKeepsTheLastGoodSet: a token maps to its identity by
// hash; a bad reread keeps the previous set and is reported; a good file
// on change, or on SIGHUP, replaces it.
func TestWatchRereadsAndKeepsTheLastGoodSet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	entry := func(name, role, tok string) []byte {
		return []byte("- name: " + name + "\n  role: " + role + "\n  token_sha256: " + SumHex(tok) + "\n")
	}
	require.NoError(t, os.WriteFile(path, entry("alice", "operator", "tok-1"), 0o600))
	s, err := Load(path, nil)
	require.NoError(t, err)
	e, ok := s.Lookup("tok-1")
	require.True(t, ok)
	assert.Equal(t, Identity{Name: "alice", Role: Operator}, e.Identity())
	_, ok = s.Lookup("tok-2")
	assert.False(t, ok)

	reloads := make(chan error, 10)
	s.OnReload(func(err error) { reloads <- err })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hup := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() { defer close(done); s.Watch(ctx, hup, 10*time.Millisecond) }()

	require.NoError(t, os.WriteFile(path, []byte("- name: [\n"), 0o600))
	assert.Error(t, <-reloads, "a broken file is reported")
	_, ok = s.Lookup("tok-1")
	assert.True(t, ok, "a failed reread keeps the previous identities")

	require.NoError(t, os.WriteFile(path, entry("bob", "admin", "tok-2"), 0o600))
	require.NoError(t, <-reloads)
	_, ok = s.Lookup("tok-1")
	assert.False(t, ok, "a removed identity is refused")
	e, ok = s.Lookup("tok-2")
	require.True(t, ok)
	assert.Equal(t, Admin, e.Role)

	// Same size, same modification time: only SIGHUP rereads it.
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, entry("bob", "admin", "tok-3"), 0o600))
	require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
	hup <- syscall.SIGHUP
	require.NoError(t, <-reloads)
	_, ok = s.Lookup("tok-3")
	assert.True(t, ok, "SIGHUP rereads a file the poll cannot tell changed")
	cancel()
	<-done
}

// TestExampleUsersFileLoads: deploy/users/users.yaml, the documented
// example, is a valid users file whose hashes are of the tokens it names.
func TestExampleUsersFileLoads(t *testing.T) {
	s, err := Load(filepath.Join("..", "deploy", "users", "users.yaml"), nil)
	require.NoError(t, err)
	for name, tok := range map[string]string{"alice": "replace-me-alice", "bob": "replace-me-bob", "carol": "replace-me-carol"} {
		e, ok := s.Lookup(tok)
		require.True(t, ok, name)
		assert.Equal(t, name, e.Name)
	}
}

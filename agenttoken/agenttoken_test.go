package agenttoken

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func hash(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

// TestParseNamesFileEntryAndField checks each rule's error names the
// file, the entry and the field.
func TestParseNamesFileEntryAndField(t *testing.T) {
	h := hash("a")
	for want, body := range map[string]string{
		`f.yaml: entry 1: name: required`:                               "- token_sha256: " + h + "\n  tags: [cpu]\n",
		`f.yaml: entry 1 ("p"): token_sha256: must be 64 hex digits`:    "- name: p\n  token_sha256: xyz\n  tags: [cpu]\n",
		`f.yaml: entry 1 ("p"): tags: required`:                         "- name: p\n  token_sha256: " + h + "\n",
		`f.yaml: entry 1 ("p"): tags[1]: "" must be 1 to 64 bytes`:      "- name: p\n  token_sha256: " + h + "\n  tags: [cpu, '']\n",
		`f.yaml: entry 2 ("p"): name: also the name of entry 1`:         "- name: p\n  token_sha256: " + h + "\n  tags: [a]\n- name: p\n  token_sha256: " + hash("b") + "\n  tags: [a]\n",
		`f.yaml: entry 2 ("q"): token_sha256: also the hash of entry 1`: "- name: p\n  token_sha256: " + h + "\n  tags: [a]\n- name: q\n  token_sha256: " + h + "\n  tags: [a]\n",
		`agent tokens file f.yaml: yaml: unmarshal errors:`:             "- name: p\n  token: x\n",
		`(want a YAML list of {name, token_sha256, tags})`:              "name: p\n",
		`f.yaml: entry 1 ("p"): tags: at most 64, got 65`:               "- name: p\n  token_sha256: " + h + "\n  tags: [" + strings.Repeat("t,", 64) + "t]\n",
	} {
		_, err := Parse("f.yaml", []byte(body))
		require.Error(t, err, want)
		assert.Contains(t, err.Error(), want)
	}
}

// TestLookupAndReload: a token maps to its entry by its hash; a reread
// of a broken file keeps the previous entries; a good one replaces them.
func TestLookupAndReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	require.NoError(t, os.WriteFile(path, []byte("- name: cpu-pool\n  token_sha256: "+hash("tok-1")+"\n  tags: [cpu]\n"), 0o600))
	s, err := Load(path, nil)
	require.NoError(t, err)
	e := s.Lookup("tok-1")
	require.NotNil(t, e)
	assert.Equal(t, "cpu-pool", e.Name)
	tag, out := e.Outside([]string{"cpu", "gpu"})
	assert.True(t, out)
	assert.Equal(t, "gpu", tag)
	assert.Nil(t, s.Lookup("tok-2"))

	require.NoError(t, os.WriteFile(path, []byte("- name: [\n"), 0o600))
	require.Error(t, s.Reload())
	assert.NotNil(t, s.Lookup("tok-1"), "a failed reread keeps the previous tokens")

	require.NoError(t, os.WriteFile(path, []byte("- name: gpu-pool\n  token_sha256: "+hash("tok-2")+"\n  tags: [gpu]\n"), 0o600))
	assert.True(t, s.changed())
	require.NoError(t, s.Reload())
	assert.Nil(t, s.Lookup("tok-1"), "a rotated-out token is refused")
	assert.Equal(t, "gpu-pool", s.Lookup("tok-2").Name)
	assert.False(t, s.changed())
}

// TestWatchRereadsOnChangeAndOnHUP: Watch puts a changed file in effect
// on its own, and a file whose size and time did not change on a value on
// hup.
func TestWatchRereadsOnChangeAndOnHUP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	entry := func(name, tok string) []byte {
		return []byte("- name: " + name + "\n  token_sha256: " + hash(tok) + "\n  tags: [cpu]\n")
	}
	require.NoError(t, os.WriteFile(path, entry("one", "tok-1"), 0o600))
	s, err := Load(path, nil)
	require.NoError(t, err)
	watch := func(hup chan os.Signal, poll time.Duration) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); s.Watch(ctx, hup, poll) }()
		return func() { cancel(); <-done }
	}

	stop := watch(nil, 10*time.Millisecond)
	require.NoError(t, os.WriteFile(path, entry("two", "tok-2"), 0o600))
	require.Eventually(t, func() bool { return s.Lookup("tok-2") != nil }, 5*time.Second, 5*time.Millisecond, "a change is noticed")
	stop()

	// Same size, and the old modification time put back: only hup tells
	// (the poll of this Watch never comes).
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, entry("tri", "tok-3"), 0o600))
	require.NoError(t, os.Chtimes(path, fi.ModTime(), fi.ModTime()))
	require.False(t, s.changed())
	hup := make(chan os.Signal, 1)
	stop = watch(hup, time.Hour)
	defer stop()
	hup <- syscall.SIGHUP
	require.Eventually(t, func() bool { return s.Lookup("tok-3") != nil }, 5*time.Second, 5*time.Millisecond, "SIGHUP rereads")
}

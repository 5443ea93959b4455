package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// TestSecretsSetListDelete drives `vigil secrets` against the fake API:
// set reads the value from stdin (one trailing newline dropped) or a
// file (as is), never prints it, and list and delete use their routes.
func TestSecretsSetListDelete(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	var mu sync.Mutex
	var got []string
	f.mux.HandleFunc("PUT /v1/secrets/{name}", func(w http.ResponseWriter, r *http.Request) {
		var req protocol.SetSecretRequest
		b, _ := io.ReadAll(r.Body)
		require.NoError(t, json.Unmarshal(b, &req))
		mu.Lock()
		got = append(got, req.Value)
		n := int64(len(got))
		mu.Unlock()
		fakeJSON(w, http.StatusOK, protocol.SetSecretResponse{Secret: protocol.Secret{Name: r.PathValue("name"), Version: n,
			CreatedAt: cliTime(0), UpdatedAt: cliTime(int(n))}, Created: n == 1})
	})
	f.reply("GET /v1/secrets", http.StatusOK, protocol.SecretList{Secrets: []protocol.Secret{
		{Name: "db_password", Version: 2, CreatedAt: cliTime(0), UpdatedAt: cliTime(3)}}})
	f.mux.HandleFunc("DELETE /v1/secrets/{name}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })

	r := runCLIWithStdin(t, strings.NewReader("from-stdin\n"), append([]string{"secrets", "set", "db_password"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "secret db_password created (version 1)\n", r.stdout)
	file := filepath.Join(t.TempDir(), "v")
	require.NoError(t, os.WriteFile(file, []byte("from-file\n"), 0o600))
	r = runCLI(t, append([]string{"secrets", "set", "db_password", "--from-file", file}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "secret db_password updated (version 2)\n", r.stdout)
	assert.Equal(t, []string{"from-stdin", "from-file\n"}, got)

	r = runCLI(t, append([]string{"secrets", "list"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, []string{"NAME", "VERSION", "CREATED", "UPDATED"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"db_password", "2", fmtTime(cliTime(0)), fmtTime(cliTime(3))}, strings.Fields(lines[1]))

	r = runCLI(t, append([]string{"secrets", "delete", "db_password"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "secret db_password deleted\n", r.stdout)
	assert.Contains(t, f.requestLog(), "DELETE /v1/secrets/db_password")
}

// TestSecretsSetRefusesBadInput: a bad name, a short or oversized value
// and a missing file are usage errors (exit 2) naming the argument or
// source and the rule, sent nowhere, and never quoting the value.
func TestSecretsSetRefusesBadInput(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat("x", 64<<10+1)), 0o600))
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"abcd", []string{"secrets", "set", "db-password"}, `NAME "db-password": must be 1 to 128 characters`},
		{"abc\n", []string{"secrets", "set", "pw"}, "stdin: the value must be at least 4 bytes (got 3)"},
		{"", []string{"secrets", "set", "pw", "--from-file", big}, "--from-file " + big + ": the value must be at most 65536 bytes"},
		{"", []string{"secrets", "set", "pw", "--from-file", filepath.Join(dir, "nope")}, "--from-file " + filepath.Join(dir, "nope")},
		{"", []string{"secrets", "delete", "1pw"}, `NAME "1pw": must be`},
	} {
		r := runCLIWithStdin(t, strings.NewReader(c.stdin), append(c.args, f.serverArgs()...)...)
		require.Error(t, r.err, c.args)
		assert.Equal(t, 2, r.code, c.args)
		assert.Contains(t, r.err.Error(), c.want)
		assert.NotContains(t, r.err.Error(), "abc")
	}
	assert.Empty(t, f.requestLog(), "nothing is sent")
}

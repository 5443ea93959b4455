package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// These tests set environment variables, so none of them is parallel.

// clearClientEnv unsets what could leak in from the developer's shell.
func clearClientEnv(t *testing.T) {
	for _, k := range []string{"VIGIL_SERVER", "VIGIL_TOKEN", "VIGIL_OUTPUT", "VIGIL_CONFIG", "VIGIL_DATA_DIR"} {
		t.Setenv(k, "")
		require.NoError(t, os.Unsetenv(k)) // Setenv restores the old value after the test
	}
}

func dagsFake(t *testing.T) *fakeAPI {
	f := newFakeAPI(t)
	f.reply("GET /v1/dags", http.StatusOK, protocol.DAGList{DAGs: []protocol.DAG{}})
	return f
}

func TestEnvServerAndToken(t *testing.T) {
	clearClientEnv(t)
	f := dagsFake(t)
	t.Setenv("VIGIL_SERVER", f.URL)
	t.Setenv("VIGIL_TOKEN", fakeToken)
	r := runCLI(t, "dags", "list")
	require.NoError(t, r.err)
	assert.Equal(t, []string{"GET /v1/dags"}, f.requestLog())
	assert.Equal(t, []string{"Bearer " + fakeToken}, f.authLog())

	// A flag beats the environment.
	t.Setenv("VIGIL_SERVER", "http://127.0.0.1:1")
	r = runCLI(t, "dags", "list", "--server", f.URL)
	require.NoError(t, r.err)
}

func TestEnvOutput(t *testing.T) {
	clearClientEnv(t)
	f := dagsFake(t)
	t.Setenv("VIGIL_OUTPUT", "json")
	r := runCLI(t, append([]string{"dags", "list"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.JSONEq(t, `{"dags": []}`, r.stdout, "the API's shape (GET /v1/dags)")
}

func TestTokenFallbackFile(t *testing.T) {
	clearClientEnv(t)
	f := dagsFake(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "operator.token"), []byte("  "+fakeToken+"\n"), 0o600))
	t.Setenv("VIGIL_DATA_DIR", dir)
	r := runCLI(t, "dags", "list", "--server", f.URL)
	require.NoError(t, r.err)
	assert.Equal(t, []string{"Bearer " + fakeToken}, f.authLog())

	// The default directory is .vigil under the working directory.
	require.NoError(t, os.Unsetenv("VIGIL_DATA_DIR"))
	work := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(work, ".vigil"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(work, ".vigil", "operator.token"), []byte(fakeToken), 0o600))
	t.Chdir(work)
	r = runCLI(t, "dags", "list", "--server", f.URL)
	require.NoError(t, r.err)
}

func TestTokenMissing(t *testing.T) {
	clearClientEnv(t)
	f := dagsFake(t)
	t.Setenv("VIGIL_DATA_DIR", t.TempDir())
	r := runCLI(t, "dags", "list", "--server", f.URL)
	assert.Equal(t, exitUsage, r.code)
	require.Error(t, r.err)
	assert.Equal(t, "--token: required (or --token-file, or VIGIL_TOKEN; Lite writes one to .vigil/operator.token)", r.err.Error())
	assert.Empty(t, f.requestLog())
}

func TestBadServerIsUsage(t *testing.T) {
	clearClientEnv(t)
	for _, server := range []string{"127.0.0.1:8080", "ftp://x", "http://"} {
		r := runCLI(t, "runs", "list", "--server", server, "--token", "t")
		assert.Equal(t, exitUsage, r.code, server)
		if assert.Error(t, r.err) {
			assert.Contains(t, r.err.Error(), "--server")
		}
	}
	t.Setenv("VIGIL_SERVER", "nonsense")
	r := runCLI(t, "runs", "list", "--token", "t")
	assert.Equal(t, exitUsage, r.code)
}

func TestServerUnreachable(t *testing.T) {
	clearClientEnv(t)
	f := dagsFake(t)
	url := f.URL
	f.Close()
	r := runCLI(t, "dags", "list", "--server", url, "--token", "t")
	assert.Equal(t, exitError, r.code)
}

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api"
)

// rawGet is GET path on lite with token: the status and the whole body.
func rawGet(t *testing.T, lite *liteProc, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, lite.URL+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := apiClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestSecretReachesItsTaskAndNothingElse: a real Lite (its key generated
// in the data directory) and its real in-process agent. `vigil secrets
// set` stores a value; `vigil dags apply` refuses a DAG naming a secret
// that does not exist and accepts one naming the stored one; the task
// gets the value (it writes it to a file the test reads) and prints it on
// stdout and stderr, and its log holds *** instead. Every GET route of
// the API, for the viewer and the operator, every event of the run and
// every line of the server's log (at debug level) are free of the value.
// Deleted, the secret fails the next run's task with reason
// secret_missing instead of running it without the value.
func TestSecretReachesItsTaskAndNothingElse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	viewerFile := filepath.Join(dir, "viewer.token")
	require.NoError(t, os.WriteFile(viewerFile, []byte(viewerToken+"\n"), 0o600))
	lite := startLite(t, liteOpts{Agents: 1, Extra: []string{"--viewer-token-file", viewerFile, "--log-level", "debug"}})
	key, err := os.Stat(filepath.Join(lite.DataDir, "secrets.key"))
	require.NoError(t, err, "Lite generates its secrets key in the data directory")
	assert.Equal(t, os.FileMode(0o600), key.Mode().Perm())

	value := "e2e-" + randomHex(12)
	valueFile := filepath.Join(dir, "value")
	require.NoError(t, os.WriteFile(valueFile, []byte(value), 0o600))
	out, code := cli(t, lite, "secrets", "set", "db_password", "--from-file", valueFile)
	require.Equal(t, 0, code, out)
	assert.Equal(t, "secret db_password created (version 1)\n", out)

	got := filepath.Join(dir, "got")
	spec := writeDAG(t, dir, "secret.yaml", fmt.Sprintf(`
dag_id: secret
tasks:
  - id: use
    env:
      OUT: %q
      DB_PASSWORD: {secret: db_password}
    command: ["sh", "-c", "printf %%s \"$DB_PASSWORD\" > \"$OUT\"; echo \"pw=$DB_PASSWORD\"; echo \"err $DB_PASSWORD\" >&2"]
`, got))
	missing := writeDAG(t, dir, "missing.yaml", "dag_id: missing\ntasks:\n  - id: t\n    command: [\"true\"]\n    env: {TOKEN: {secret: api_token}}\n")
	r := runVigil(t, []string{"VIGIL_SERVER=" + lite.URL, "VIGIL_TOKEN=" + operatorToken}, "dags", "apply", missing)
	assert.NotEqual(t, 0, r.Code)
	assert.Contains(t, r.Stderr, `dag "missing": task "t": env TOKEN: secret "api_token": no such secret`)
	out, code = cli(t, lite, "dags", "apply", spec)
	require.Equal(t, 0, code, out)

	run, code := triggerJSON(t, lite, "secret", true)
	require.Equal(t, 0, code, "run %d", run.ID)
	b, err := os.ReadFile(got)
	require.NoError(t, err)
	assert.Equal(t, value, string(b), "the task got the value")
	logs := taskLogs(t, lite, run.ID, "use")
	var lines []string
	for _, l := range logs.Lines {
		lines = append(lines, l.Stream+": "+l.Line)
	}
	assert.Contains(t, lines, "stdout: pw=***")
	assert.Contains(t, lines, "stderr: err ***")

	// Every GET route, for both reading roles: none holds the value, and
	// the DAG shows the reference.
	params := strings.NewReplacer("{dag_id}", "secret", "{run_id}", strconv.FormatInt(run.ID, 10), "{task_id}", "use")
	for _, rt := range api.Routes() {
		if rt.Method != http.MethodGet {
			continue
		}
		path := params.Replace(rt.Path)
		for _, token := range []string{operatorToken, viewerToken} {
			status, body := rawGet(t, lite, path, token)
			assert.NotContains(t, body, value, "GET %s (%d)", path, status)
		}
	}
	_, dagBody := rawGet(t, lite, "/v1/dags/secret", viewerToken)
	assert.Contains(t, dagBody, `"DB_PASSWORD":{"secret":"db_password"}`)
	status, _ := rawGet(t, lite, "/v1/secrets", viewerToken)
	assert.Equal(t, http.StatusForbidden, status, "the viewer may not list secrets")
	for _, ev := range runEvents(t, lite, run.ID) {
		assert.NotContains(t, ev.Message, value, "event %s", ev.Kind)
	}
	out, code = cli(t, lite, "secrets", "list", "-o", "json")
	require.Equal(t, 0, code)
	assert.NotContains(t, out, value)

	// Deleted after the apply: the next run's task fails secret_missing.
	out, code = cli(t, lite, "secrets", "delete", "db_password")
	require.Equal(t, 0, code, out)
	require.NoError(t, os.Remove(got))
	again, code := triggerJSON(t, lite, "secret", true)
	assert.NotEqual(t, 0, code)
	ti := taskInstance(t, waitRunState(t, lite, again.ID, "failed", 30*time.Second), "use")
	assert.Equal(t, "secret_missing", ti.Reason)
	_, err = os.Stat(got)
	assert.ErrorIs(t, err, os.ErrNotExist, "the task never ran")

	logText, err := os.ReadFile(lite.LogPath())
	require.NoError(t, err)
	require.Contains(t, string(logText), `"msg":"secret set"`, "the server log is read (at debug level)")
	assert.False(t, strings.Contains(string(logText), value), "the server's log (%s) holds the value", lite.LogPath())
}

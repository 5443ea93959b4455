package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// isolationScript is the task of TestTaskUserReachesNoFileOrDatabaseOfVigil:
// it reads each file listed in $LIST (the data directory's top level,
// each error shown, then the cluster's files, counted, the first error
// shown), lists the data directory, and connects to the private
// PostgreSQL with psql over the socket and TCP, without and with the
// password file's path (as passfile and as PGPASSFILE). It prints READ or
// CONNECTED for each success and exits with their count: 0 only when
// every attempt failed.
const isolationScript = `
got=0; n=0; denied=0; first=""
while IFS= read -r f; do
  case "$f" in
  "$DATA"/pg/*)
    n=$((n+1))
    if err=$(cat -- "$f" 2>&1 >/dev/null); then echo "READ $f"; got=$((got+1)); else denied=$((denied+1)); [ -n "$first" ] || first=$err; fi ;;
  *)
    if cat -- "$f" >/dev/null; then echo "READ $f"; got=$((got+1)); fi ;;
  esac
done < "$LIST"
echo "cluster files: $denied of $n denied; first error: $first"
if ls -- "$DATA" >/dev/null; then echo "LISTED $DATA"; got=$((got+1)); fi
sock="host=$DATA/pg port=$PORT user=vigil dbname=vigil"
tcp="host=127.0.0.1 port=$PORT user=vigil dbname=vigil sslmode=disable"
for conn in "$sock" "$tcp" "$sock passfile=$DATA/postgres.password" "$tcp passfile=$DATA/postgres.password"; do
  echo "psql: $conn"
  if psql -w -X -At -c 'SELECT 1' "$conn"; then echo "CONNECTED $conn"; got=$((got+1)); fi
done
echo "psql: PGPASSFILE=$DATA/postgres.password $tcp"
if PGPASSFILE="$DATA/postgres.password" psql -w -X -At -c 'SELECT 1' "$tcp"; then echo "CONNECTED PGPASSFILE"; got=$((got+1)); fi
echo "successes: $got"
exit $got
`

// TestTaskUserReachesNoFileOrDatabaseOfVigil runs a real Lite as root
// with its private PostgreSQL and --task-user nobody; a task tries to
// read every file in the data directory (tokens, the cluster's password,
// the cluster) and to connect to the database with psql over the socket
// and TCP, with and without the password file's path. Every attempt
// fails, the run succeeds (the task exits 0 only then), and the task's
// own errors are in its log. The data directory, left 0755 with 0644
// tokens as an older Lite would leave it, is private after the start.
func TestTaskUserReachesNoFileOrDatabaseOfVigil(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("--task-user needs root: run the tests as root, as make test and CI do (README)")
	}
	lite := startLite(t, liteOpts{Agents: 1, PrivateCluster: true, Extra: []string{"--task-user", "nobody"}})
	port := clusterPort(t, lite)

	fi, err := os.Stat(lite.DataDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o710), fi.Mode().Perm(), "root:postgres 0710 as root with the private cluster")
	var files, top []string
	require.NoError(t, filepath.WalkDir(lite.DataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, p)
			if filepath.Dir(p) == lite.DataDir {
				top = append(top, p)
				fi, err := d.Info()
				require.NoError(t, err)
				assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
			}
		}
		return err
	}))
	for _, name := range []string{"agent.token", "operator.token", "postgres.password"} {
		require.Contains(t, top, filepath.Join(lite.DataDir, name))
	}
	listDir, err := os.MkdirTemp("", "vigil-e2e-isolation-") // outside the harness's root-only temp dirs
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(listDir) })
	require.NoError(t, os.Chmod(listDir, 0o755))
	list := filepath.Join(listDir, "files")
	require.NoError(t, os.WriteFile(list, []byte(strings.Join(files, "\n")+"\n"), 0o644))

	dags := t.TempDir()
	writeDAG(t, dags, "isolation", fmt.Sprintf(`
dag_id: isolation
tasks:
  - id: probe
    env: {DATA: %q, PORT: "%d", LIST: %q}
    command: ["sh", "-c", %s]
`, lite.DataDir, port, list, strconv.Quote(isolationScript)))
	out, code := cli(t, lite, "dags", "apply", dags)
	require.Equal(t, 0, code, out)
	run, code := triggerJSON(t, lite, "isolation", true)
	var log []string
	for _, l := range taskLogs(t, lite, run.ID, "probe").Lines {
		log = append(log, l.Stream+": "+l.Line)
	}
	text := strings.Join(log, "\n")
	t.Logf("task log:\n%s", text)
	require.Equal(t, 0, code, "the run fails when the task read or connected to anything")
	assert.Contains(t, text, "successes: 0")
	for _, f := range top {
		assert.Contains(t, text, "stderr: cat: "+f+": Permission denied")
	}
	assert.Contains(t, text, fmt.Sprintf("cluster files: %d of %d denied; first error: cat: ", len(files)-len(top), len(files)-len(top)))
	assert.Contains(t, text, "stderr: ls: cannot open directory '"+lite.DataDir+"': Permission denied")
	assert.Contains(t, text, fmt.Sprintf(`.s.PGSQL.%d" failed: Permission denied`, port), "the socket")
	assert.Contains(t, text, "fe_sendauth: no password supplied", "TCP")
}

// clusterPort is the private PostgreSQL's port, from Lite's log line.
func clusterPort(t *testing.T, lite *liteProc) int {
	t.Helper()
	for _, l := range jsonLogLines(lite.LogPath()) {
		if l["msg"] == "private PostgreSQL started" {
			if p, ok := l["port"].(float64); ok {
				return int(p)
			}
		}
	}
	t.Fatalf("no \"private PostgreSQL started\" line with its port in %s", lite.LogPath())
	return 0
}

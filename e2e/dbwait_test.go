package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/store/pgcluster"
)

// TestServerWaitsForDatabase (docs/operations.md, "Start-up"): a replica
// started while its PostgreSQL is down keeps retrying, logging each
// failed try, and serves once PostgreSQL is started.
func TestServerWaitsForDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := pgcluster.Config{Dir: filepath.Join(t.TempDir(), "pg"), Port: freePort(t), Ephemeral: true}
	pg, err := pgcluster.Start(ctx, cfg) // initdb and the database, then down
	require.NoError(t, err)
	dbURL := pg.URL(pgcluster.DefaultDBName)
	require.NoError(t, pg.Stop(ctx))

	etcd := etcdtest.Start(t)
	r := startReplica(t, "waiter", dbURL, etcd, nil, "--database-wait", "2m")
	waitFor(t, 30*time.Second, func() bool { return len(waitTries(r.p.logPath)) >= 2 }, "two failed tries logged")
	_, serving := r.health()
	assert.False(t, serving, "no API before the database is there")

	pg, err = pgcluster.Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	waitFor(t, readyTimeout, func() bool { _, ok := r.health(); return ok }, "the replica serving after PostgreSQL started")
	require.False(t, r.p.exited())

	tries := waitTries(r.p.logPath)
	for i, l := range tries {
		assert.Equal(t, "WARN", l["level"])
		assert.EqualValues(t, i+1, l["try"], "tries are numbered")
		assert.NotEmpty(t, l["err"])
		assert.NotEmpty(t, l["left"])
	}
	log, err := os.ReadFile(r.p.logPath)
	require.NoError(t, err)
	assert.Contains(t, string(log), "vigil server ready")
}

// TestServerDatabaseWaitBound: with nothing ever listening, the replica
// exits 1 once --database-wait has passed, naming the flag and the bound;
// SIGTERM during the wait stops it at once with exit 0.
func TestServerDatabaseWaitBound(t *testing.T) {
	t.Parallel()
	dbURL := fmt.Sprintf("postgres://vigil@127.0.0.1:%d/vigil?sslmode=disable", freePort(t))
	r := startReplica(t, "gives-up", dbURL, []string{fmt.Sprintf("127.0.0.1:%d", freePort(t))}, nil, "--database-wait", "1s")
	assert.Equal(t, 1, r.p.waitExit(t, 30*time.Second))
	log, err := os.ReadFile(r.p.logPath)
	require.NoError(t, err)
	assert.Contains(t, string(log), "vigil: database still unreachable after --database-wait 1s")
	assert.NotEmpty(t, waitTries(r.p.logPath), "the failed tries are logged")

	// SIGTERM during the wait: a clean stop at once, not at the bound.
	r = startReplica(t, "stopped", dbURL, []string{fmt.Sprintf("127.0.0.1:%d", freePort(t))}, nil, "--database-wait", "1h")
	waitFor(t, 30*time.Second, func() bool { return len(waitTries(r.p.logPath)) >= 1 }, "a failed try logged")
	r.p.signal(syscall.SIGTERM)
	assert.Equal(t, 0, r.p.waitExit(t, 5*time.Second), "SIGTERM ends the wait")
}

// waitTries returns the JSON log lines of the start-up database wait.
func waitTries(path string) []map[string]any {
	var out []map[string]any
	for _, l := range jsonLogLines(path) {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "database unreachable at start-up") {
			out = append(out, l)
		}
	}
	return out
}

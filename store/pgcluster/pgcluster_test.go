package pgcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// query connects to url and returns the single text value of sql.
func query(t *testing.T, url, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var s string
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(&s))
	return s
}

func execSQL(t *testing.T, url, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}

// TestStartStopReuse covers the life of one data directory: initdb and
// start, a second Start while running, stop, restart on the same directory
// with other settings, and idempotent Stop.
func TestStartStopReuse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")

	c, err := Start(ctx, Config{Dir: dir, Ephemeral: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })

	assert.Equal(t, dir, c.Dir())
	assert.NotZero(t, c.Port())
	assert.FileExists(t, filepath.Join(dir, "PG_VERSION"))
	assert.FileExists(t, c.LogFile())
	assert.FileExists(t, filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(c.Port())), "unix socket in Dir")
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	url := c.URL(DefaultDBName)
	assert.Equal(t, "vigil", query(t, url, "SELECT current_database()"))
	assert.Equal(t, User, query(t, url, "SELECT current_user"))
	assert.Equal(t, "127.0.0.1", query(t, url, "SHOW listen_addresses"))
	assert.Equal(t, "UTF8", query(t, url, "SHOW server_encoding"))
	assert.Equal(t, "off", query(t, url, "SHOW fsync"))
	assert.Equal(t, "32MB", query(t, url, "SHOW shared_buffers"))
	assert.Equal(t, "200", query(t, url, "SHOW max_connections"))
	execSQL(t, url, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")

	// A second server on the same directory is refused clearly.
	_, err = Start(ctx, Config{Dir: dir})
	require.ErrorIs(t, err, ErrAlreadyRunning)
	assert.Contains(t, err.Error(), dir)

	require.NoError(t, c.Stop(ctx))
	require.NoError(t, c.Stop(ctx), "Stop is idempotent")
	assert.NoFileExists(t, filepath.Join(dir, "postmaster.pid"))
	_, err = pgx.Connect(ctx, url)
	require.Error(t, err, "server is down")

	// Restart on the same directory: no initdb, data kept, settings rewritten.
	port, err := freePort()
	require.NoError(t, err)
	c2, err := Start(ctx, Config{Dir: dir, Port: port, DBName: "other"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Stop(context.Background()) })
	assert.Equal(t, port, c2.Port())
	assert.Equal(t, "42", query(t, c2.URL(DefaultDBName), "SELECT v::text FROM kept"))
	assert.Equal(t, "other", query(t, c2.URL("other"), "SELECT current_database()"))
	assert.Equal(t, "on", query(t, c2.URL(DefaultDBName), "SHOW fsync"), "not ephemeral any more")
	require.NoError(t, c2.Stop(ctx))
	require.NoError(t, c2.Stop(ctx))
}

func TestStopCancelledContextStillStops(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	c, err := Start(context.Background(), Config{Dir: dir, Ephemeral: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, c.Stop(ctx))
	assert.NoFileExists(t, filepath.Join(dir, "postmaster.pid"))
}

func TestStartNoBinaries(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	_, err := Start(context.Background(), Config{Dir: dir, BinDir: t.TempDir()})
	require.ErrorIs(t, err, ErrNoBinaries)
	assert.Contains(t, err.Error(), "apt-get install postgresql")
	assert.Contains(t, err.Error(), "--database-url")
	assert.NoDirExists(t, dir, "nothing created")
}

func TestStartRequiresDir(t *testing.T) {
	t.Parallel()
	_, err := Start(context.Background(), Config{})
	require.Error(t, err)
	_, err = Start(context.Background(), Config{Dir: t.TempDir(), Port: 70000})
	require.Error(t, err)
}

func TestURL(t *testing.T) {
	t.Parallel()
	c := &Cluster{port: 5433}
	assert.Equal(t, "postgres://vigil@127.0.0.1:5433/vigil?sslmode=disable", c.URL("vigil"))
	assert.Equal(t, "postgres://vigil@127.0.0.1:5433/a%20b?sslmode=disable", c.URL("a b"))
}

func TestGlobNewestFirst(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, v := range []string{"9.6", "15", "10", "16", "x"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, v, "bin"), 0o755))
	}
	got := globNewestFirst(filepath.Join(root, "*", "bin"))
	var vs []string
	for _, p := range got {
		vs = append(vs, filepath.Base(filepath.Dir(p)))
	}
	assert.Equal(t, []string{"16", "15", "10", "9.6", "x"}, vs)
}

func TestConfQuote(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `'a''b\\c'`, confQuote(`a'b\c`))
	assert.True(t, errors.Is(error(&cmdError{err: ErrNoBinaries}), ErrNoBinaries))
}

// TestStartAfterCrash: a postmaster killed with SIGKILL leaves a stale
// postmaster.pid; the next Start recovers the cluster with every committed
// row (not Ephemeral: synchronous_commit is on).
func TestStartAfterCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	c, err := Start(ctx, Config{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	execSQL(t, c.URL(DefaultDBName), "CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)")

	pidFile, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.SplitN(string(pidFile), "\n", 2)[0])
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil || isZombie(pid) },
		10*time.Second, 20*time.Millisecond)
	assert.FileExists(t, filepath.Join(dir, "postmaster.pid"), "stale pid file left behind")

	var c2 *Cluster
	require.Eventually(t, func() bool { // orphaned backends take a moment to notice
		c2, err = Start(ctx, Config{Dir: dir, Ephemeral: true})
		return err == nil
	}, 20*time.Second, 200*time.Millisecond, "restart after crash: %v", err)
	t.Cleanup(func() { _ = c2.Stop(context.Background()) })
	assert.Equal(t, "7", query(t, c2.URL(DefaultDBName), "SELECT v::text FROM kept"))
	require.NoError(t, c2.Stop(ctx))
}

// isZombie reports whether pid has exited but is not yet reaped (our
// postmasters are reparented to init, which may reap late).
func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

package storetest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var migrateCalls atomic.Int32

func TestMain(m *testing.M) {
	// A stub migration: the real store.Migrate is tested by package store.
	Migrate = func(ctx context.Context, url string) error {
		migrateCalls.Add(1)
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE migrated (v text); INSERT INTO migrated VALUES ('stub')")
		return err
	}
	Main(m)
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func tableExists(t *testing.T, conn *pgx.Conn, table string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, conn.QueryRow(context.Background(),
		"SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok))
	return ok
}

func dbExists(t *testing.T, name string) bool {
	t.Helper()
	conn := connect(t, srv.adminURL)
	var ok bool
	require.NoError(t, conn.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok))
	return ok
}

func dbOf(t *testing.T, url string) string {
	cfg, err := pgconn.ParseConfig(url)
	require.NoError(t, err)
	return cfg.Database
}

func TestDBIsolated(t *testing.T) {
	t.Parallel()
	a, b := DB(t), DB(t)
	require.NotEqual(t, a, b)
	ca, cb := connect(t, a), connect(t, b)

	for _, c := range []*pgx.Conn{ca, cb} {
		var v string
		require.NoError(t, c.QueryRow(context.Background(), "SELECT v FROM migrated").Scan(&v))
		assert.Equal(t, "stub", v, "cloned from the migrated template")
	}
	_, err := ca.Exec(context.Background(), "CREATE TABLE only_a (id int)")
	require.NoError(t, err)
	assert.True(t, tableExists(t, ca, "only_a"))
	assert.False(t, tableExists(t, cb, "only_a"))
}

func TestDBParallel(t *testing.T) {
	t.Parallel()
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			conn := connect(t, DB(t))
			assert.True(t, tableExists(t, conn, "migrated"))
			var db string
			require.NoError(t, conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&db))
			assert.True(t, strings.HasPrefix(db, "test_testdbparallel_"+fmt.Sprint(i)+"_"), db)
		})
	}
}

// TestDBDroppedAtCleanup: the database is gone after the test, even with a
// connection the test left open.
func TestDBDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("inner", func(t *testing.T) {
		url := DB(t)
		name = dbOf(t, url)
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url) // deliberately not closed before cleanup
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(ctx) }) // runs after DB's cleanup
		assert.True(t, dbExists(t, name))
	})
	require.NotEmpty(t, name)
	assert.False(t, dbExists(t, name))
}

func TestMigrateOncePerBinary(t *testing.T) {
	t.Parallel()
	DB(t)
	DB(t)
	assert.EqualValues(t, 1, migrateCalls.Load())
	if srv.cluster != nil {
		assert.DirExists(t, srv.tmpDir)
	}
	assert.Equal(t, os.Getenv(EnvDatabaseURL) == "", srv.cluster != nil)
}

func TestDBName(t *testing.T) {
	t.Parallel()
	n := dbName("test_", "TestX/sub case#"+strings.Repeat("y", 100))
	assert.LessOrEqual(t, len(n), 63)
	assert.Regexp(t, `^test_testx_sub_case_y+_[0-9a-f]{12}$`, n)
	assert.Regexp(t, `^vigil_template_[0-9a-f]{12}$`, dbName("vigil_template_", ""))
}

func TestWithDB(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "postgres://u:p@h:5/x?sslmode=disable", withDB("postgres://u:p@h:5/postgres?sslmode=disable", "x"))
	assert.Equal(t, "host=h dbname=postgres dbname=x", withDB("host=h dbname=postgres", "x"))
}

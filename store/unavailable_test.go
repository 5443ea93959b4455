package store_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestUnavailableClassifiesServerCodes: SQLSTATE class 08, 57P01..03 and
// 53300 are retried at start-up; every other server error is permanent,
// also when wrapped.
func TestUnavailableClassifiesServerCodes(t *testing.T) {
	for code, want := range map[string]bool{
		"08000": true, "08001": true, "08006": true, "57P01": true, "57P02": true, "57P03": true, "53300": true,
		"42601": false, "28P01": false, "3D000": false, "42P01": false, "57014": false, "40001": false,
	} {
		err := fmt.Errorf("migrate: %w", &pgconn.PgError{Code: code})
		assert.Equal(t, want, store.Unavailable(err), "SQLSTATE %s", code)
	}
	assert.False(t, store.Unavailable(nil))
	assert.False(t, store.Unavailable(context.Canceled), "a signal is not unavailability")
	assert.True(t, store.Unavailable(fmt.Errorf("x: %w", context.DeadlineExceeded)))
}

// TestUnavailableOnRealErrors classifies the errors Migrate returns from a
// real PostgreSQL and a real closed port.
func TestUnavailableOnRealErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	err = store.Migrate(ctx, "postgres://vigil@"+closed+"/vigil?sslmode=disable&connect_timeout=5")
	require.Error(t, err)
	assert.True(t, store.Unavailable(err), "connection refused: %v", err)

	dbURL := storetest.DB(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.Path = "/no_such_database_here"
	err = store.Migrate(ctx, u.String())
	require.Error(t, err)
	assert.False(t, store.Unavailable(err), "a missing database is permanent: %v", err)

	// A schema newer than the binary: a real migration error, not retried.
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE vigil_schema_version SET version = version + 1000`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	err = store.Migrate(ctx, dbURL)
	require.Error(t, err)
	assert.False(t, store.Unavailable(err), "a newer schema is permanent: %v", err)
}

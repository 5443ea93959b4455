package store_test

import (
	"context"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/pgcluster"
	"github.com/vigil-sched/vigil/store/storetest"
)

// A failover manager (Patroni, docs/operations.md) moves the primary
// between hosts; Vigil follows it through a multi-host URL with
// target_session_attrs=read-write. Here the first host is a server that
// answers like a hot standby (transaction_read_only on, the same
// database) and the second the primary: the store opens, and its main and
// leader pools write on the primary. Without the attribute the same URL
// lands on the read-only host and the write fails.
func TestAMultiHostURLReachesTheReadWriteHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := storetest.DB(t)
	u, err := url.Parse(primary)
	require.NoError(t, err)
	dbName := u.Path[1:]

	standby, err := pgcluster.Start(ctx, pgcluster.Config{Dir: filepath.Join(t.TempDir(), "standby"), Ephemeral: true, DBName: dbName})
	require.NoError(t, err)
	t.Cleanup(func() { _ = standby.Stop(context.Background()) })
	conn, err := pgx.Connect(ctx, standby.URL("postgres"))
	require.NoError(t, err)
	// A multi-host URL has one user for every host: the standby must let
	// in the primary URL's user (a throwaway cluster's own user, or the
	// user of $VIGIL_TEST_DATABASE_URL's server), or pgx would fall back
	// to the primary for a refused login and the last check below would
	// pass for the wrong reason. The standby trusts loopback logins.
	if name := u.User.Username(); name != pgcluster.User {
		_, err = conn.Exec(ctx, `CREATE ROLE `+pgx.Identifier{name}.Sanitize()+` SUPERUSER LOGIN`)
		require.NoError(t, err)
	}
	_, err = conn.Exec(ctx, `ALTER SYSTEM SET default_transaction_read_only = on`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT pg_reload_conf()`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	hosts := u.Host
	u.Host = "127.0.0.1:" + strconv.Itoa(standby.Port()) + "," + hosts
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	st := openWith(t, u.String(), store.Options{})
	require.NoError(t, st.AcquireFence(ctx, 7, "multi-host"))
	ran := false
	require.NoError(t, st.LeaderTx(ctx, 7, func(store.Tx) error { ran = true; return nil }))
	assert.True(t, ran)
	direct, err := pgx.Connect(ctx, primary)
	require.NoError(t, err)
	defer direct.Close(ctx)
	var holder string
	require.NoError(t, direct.QueryRow(ctx, `SELECT holder FROM leader_fence WHERE name = $1`, store.FenceName).Scan(&holder))
	assert.Equal(t, "multi-host", holder, "the fence moved on the primary")

	q.Del("target_session_attrs")
	u.RawQuery = q.Encode()
	other, err := store.OpenWithOptions(ctx, u.String(), store.Options{})
	if err == nil {
		t.Cleanup(other.Close)
		err = other.AcquireFence(ctx, 8, "standby")
	}
	require.Error(t, err, "without target_session_attrs the store lands on the read-only host")
}

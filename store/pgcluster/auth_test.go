package pgcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connectErr tries to connect with the libpq-style connection string and
// returns the error; nil when it got in.
func connectErr(connString string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connString)
	if err == nil {
		_ = conn.Close(ctx)
	}
	return err
}

// TestPasswordFileMigratesATrustCluster starts a cluster as an older
// Vigil made it (initdb --auth=trust), then again with a PasswordFile:
// the password file is generated 0600, pg_hba.conf rewritten, and from
// then on no connection gets in without the password, over TCP or the
// socket; with it, URL works. A restart reuses the file; a file others
// may read is refused.
func TestPasswordFileMigratesATrustCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	pwFile := filepath.Join(t.TempDir(), "postgres.password")

	c, err := Start(ctx, Config{Dir: dir, Ephemeral: true})
	require.NoError(t, err)
	require.NoError(t, connectErr(c.URL("postgres")), "trust before the migration")
	require.NoError(t, c.Stop(ctx))

	c, err = Start(ctx, Config{Dir: dir, Ephemeral: true, PasswordFile: pwFile})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	fi, err := os.Stat(pwFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	pw, err := os.ReadFile(pwFile)
	require.NoError(t, err)
	require.Len(t, pw, 2*passwordBytes+1)
	hba, err := os.ReadFile(filepath.Join(dir, "pg_hba.conf"))
	require.NoError(t, err)
	assert.Equal(t, hbaConf, string(hba))

	assert.Equal(t, "1", query(t, c.URL("postgres"), "SELECT 1::text"), "the URL carries the password")
	tcp := fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=postgres sslmode=disable", c.Port(), User)
	sock := fmt.Sprintf("host=%s port=%d user=%s dbname=postgres", dir, c.Port(), User)
	for name, conn := range map[string]string{
		"tcp": tcp, "socket": sock, "tcp, wrong password": tcp + " password=x", "socket, postgres user": sock + " user=postgres",
	} {
		err := connectErr(conn)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "password", name)
	}
	assert.Equal(t, "SCRAM-SHA-256", query(t, c.URL("postgres"),
		"SELECT split_part(rolpassword, '$', 1) FROM pg_authid WHERE rolname = '"+User+"'"))
	log, err := os.ReadFile(c.LogFile())
	require.NoError(t, err)
	assert.NotContains(t, string(log), string(pw[:2*passwordBytes]), "the password is not in the server log")

	require.NoError(t, c.Stop(ctx))
	c, err = Start(ctx, Config{Dir: dir, Ephemeral: true, PasswordFile: pwFile})
	require.NoError(t, err)
	assert.Equal(t, "1", query(t, c.URL("postgres"), "SELECT 1::text"), "the restart reuses the password file")
	require.NoError(t, c.Stop(ctx))

	require.NoError(t, os.Chmod(pwFile, 0o644))
	_, err = Start(ctx, Config{Dir: dir, Ephemeral: true, PasswordFile: pwFile})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "password file "+pwFile+" has mode 0644: group and others must not read it")
}

// TestPasswordFileNewCluster: a new cluster with a PasswordFile never
// accepts a connection without the password.
func TestPasswordFileNewCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	c, err := Start(ctx, Config{Dir: dir, Ephemeral: true, PasswordFile: filepath.Join(t.TempDir(), "pw")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	assert.Equal(t, "1", query(t, c.URL("postgres"), "SELECT 1::text"))
	err = connectErr(fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=postgres sslmode=disable", c.Port(), User))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "password")
}

// TestPrivateParent: a data directory left 0755 is narrowed; as root,
// to root:postgres 0710, through which the server reaches its cluster
// and can open nothing else.
func TestPrivateParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	parent := filepath.Join(t.TempDir(), "lite")
	require.NoError(t, os.Mkdir(parent, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(parent, "agent.token"), []byte("x\n"), 0o600))
	require.NoError(t, PrivateParent(parent, true, nil))
	fi, err := os.Stat(parent)
	require.NoError(t, err)
	want := os.FileMode(0o700)
	if os.Geteuid() == 0 {
		want = 0o710
	}
	assert.Equal(t, want, fi.Mode().Perm())
	c, err := Start(ctx, Config{Dir: filepath.Join(parent, "pg"), Ephemeral: true, PasswordFile: filepath.Join(parent, "pw")})
	require.NoError(t, err, "the server reaches its cluster through the private parent")
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	fi, err = os.Stat(parent)
	require.NoError(t, err)
	assert.Equal(t, want, fi.Mode().Perm(), "Start added no o+x")
	if os.Geteuid() == 0 {
		out, err := c.run.run(ctx, "/bin/cat", filepath.Join(parent, "agent.token"))
		require.Error(t, err, "the postgres user cannot read a token: %s", out)
		assert.Contains(t, out, "Permission denied")
	}
}

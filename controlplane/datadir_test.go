package controlplane_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/controlplane"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestLiteTightensItsDataDir: a data directory an older Lite left 0755,
// with a token file others could read, is 0700 with 0600 files once Lite
// has started; a token Lite generates is 0600 too.
func TestLiteTightensItsDataDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "lite")
	require.NoError(t, os.Mkdir(dataDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "operator.token"), []byte("0123456789abcdef0123\n"), 0o644))
	cp, err := controlplane.Start(ctx, controlplane.Config{
		Logger: quietLog(), DatabaseURL: storetest.DB(t), DataDir: dataDir, Listen: "127.0.0.1:0",
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cp.Stop(ctx) })
	fi, err := os.Stat(dataDir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "with --database-url no cluster needs to pass through")
	for _, name := range []string{"operator.token", "agent.token"} {
		fi, err := os.Stat(filepath.Join(dataDir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
	}
}

// TestLiteRefusesAnUnknownTaskUser: an in-process agent's refused
// Config fails the start, naming the field and the user.
func TestLiteRefusesAnUnknownTaskUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("task users need root: run the tests as root, as make test and CI do (README)")
	}
	_, err := controlplane.Start(context.Background(), controlplane.Config{
		Logger: quietLog(), DatabaseURL: storetest.DB(t), DataDir: t.TempDir(), Listen: "127.0.0.1:0",
		Agents: controlplane.LocalAgents{Count: 1, TaskUser: "vigil-no-such-user"},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `Agents: agent: invalid config: TaskUser "vigil-no-such-user": no such OS user on this host`)
}

package controlplane_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/controlplane"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestSecretsKeyAtStart: Lite generates DataDir/secrets.key (0600) and
// starts with it again; a different key on the same database, or a key
// file that is short, loose or missing, stops the start with an error
// naming SecretsKeyFile and the file.
func TestSecretsKeyAtStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, dataDir := storetest.DB(t), t.TempDir()
	start := func(keyFile string) error {
		cp, err := controlplane.Start(ctx, controlplane.Config{Logger: quietLog(), DatabaseURL: db, DataDir: dataDir,
			Listen: "127.0.0.1:0", SecretsKeyFile: keyFile})
		if err == nil {
			require.NoError(t, cp.Stop(ctx))
		}
		return err
	}
	require.NoError(t, start(""))
	info, err := os.Stat(filepath.Join(dataDir, "secrets.key"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	require.NoError(t, start(""), "the generated key opens the key check it stored")
	require.NoError(t, start(filepath.Join(dataDir, "secrets.key")))

	other := filepath.Join(t.TempDir(), "other.key")
	require.NoError(t, os.WriteFile(other, []byte(strings.Repeat("ab", 32)), 0o600))
	short := filepath.Join(t.TempDir(), "short.key")
	require.NoError(t, os.WriteFile(short, []byte(strings.Repeat("ab", 16)), 0o600))
	loose := filepath.Join(t.TempDir(), "loose.key")
	require.NoError(t, os.WriteFile(loose, []byte(strings.Repeat("ab", 32)), 0o644))
	for file, want := range map[string]string{
		other:                                 "the secrets key differs from the one this database's secrets were sealed with",
		short:                                 "holds 32 hexadecimal characters",
		loose:                                 "mode 0644",
		filepath.Join(t.TempDir(), "missing"): "no such file",
	} {
		err := start(file)
		var fe *controlplane.FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", file, err)
		assert.Equal(t, "SecretsKeyFile", fe.Field)
		assert.Contains(t, err.Error(), want)
		assert.Contains(t, err.Error(), file)
	}
}

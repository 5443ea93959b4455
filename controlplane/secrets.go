package controlplane

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/vigil-sched/vigil/secrets"
	"github.com/vigil-sched/vigil/store"
)

// liteSecretsKey is the key file Lite uses, in its DataDir, when
// Config.SecretsKeyFile is empty.
const liteSecretsKey = "secrets.key"

// openSecrets returns the Box of cfg's secrets key, proven against the
// database's key check (store.CheckSecretsKey), or nil for a Pro replica
// without a key (secrets off). Lite reads DataDir/secrets.key when
// SecretsKeyFile is empty, generating it (0600) when absent. A missing,
// loose, short or unreadable file, or a key that does not open the
// database's key check, is a *FieldError on SecretsKeyFile naming the
// file: never a silently empty secret. A key Lite generates now may
// replace the check while the database stores no secret.
func openSecrets(ctx context.Context, cfg Config, st *store.Store) (*secrets.Box, error) {
	path, load, fresh := cfg.SecretsKeyFile, secrets.LoadKeyFile, false
	if path == "" {
		if cfg.Pro != nil {
			return nil, nil
		}
		path, load = filepath.Join(cfg.DataDir, liteSecretsKey), secrets.EnsureKeyFile
		_, statErr := os.Stat(path)
		fresh = errors.Is(statErr, fs.ErrNotExist) // generated now: Lite's new data directory
	}
	key, err := load(path)
	if err != nil {
		return nil, fieldError("SecretsKeyFile", err, "")
	}
	box, err := secrets.NewBox(key)
	if err != nil {
		return nil, fieldError("SecretsKeyFile", err, "%s", path)
	}
	if err := st.CheckSecretsKey(ctx, box.Verifier, box.CheckVerifier, fresh); err != nil {
		return nil, fieldError("SecretsKeyFile", err, "%s", path)
	}
	cfg.Logger.Info("secrets key loaded", "file", path)
	return box, nil
}

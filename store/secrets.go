package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/dag"
)

// The store keeps secrets only sealed (package secrets seals and opens
// them; docs/security.md "Secrets"): it never sees the key or a value in
// the clear, so nothing it logs or returns can hold one.

// SecretInfo describes one stored secret, never its value. Times are the
// database clock's.
type SecretInfo struct {
	Name string
	// Version counts the sets of the name, from 1; a set after a delete
	// starts again at 1.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// SealedSecret is one secret as stored: the bytes secrets.Box.Seal made
// for Name and Version.
type SealedSecret struct {
	Name    string
	Version int64
	Sealed  []byte
}

// SecretLimitError refuses a new secret when the cluster holds its
// maximum.
type SecretLimitError struct{ Max int }

func (e *SecretLimitError) Error() string {
	return fmt.Sprintf("secrets: the cluster holds its maximum of %d secrets; delete one first", e.Max)
}

// SetSecret stores a new version of the secret name: seal is called with
// the version being written and returns the sealed value for it, so the
// version is bound into what is sealed. A new name is refused with
// *SecretLimitError when max secrets exist. Sets and deletes of secrets
// take the table's SHARE ROW EXCLUSIVE lock, one at a time (they are
// rare); claims reading secrets do not wait for them. created reports a
// new name.
func (s *Store) SetSecret(ctx context.Context, name string, max int, seal func(version int64) ([]byte, error)) (info SecretInfo, created bool, err error) {
	err = s.writeTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE secrets IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		var version int64
		var count int
		if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT version FROM secrets WHERE name = $1), 0), (SELECT count(*) FROM secrets)`,
			name).Scan(&version, &count); err != nil {
			return err
		}
		created = version == 0
		if created && count >= max {
			return &SecretLimitError{Max: max}
		}
		sealed, err := seal(version + 1)
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
			INSERT INTO secrets (name, version, sealed) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET version = EXCLUDED.version, sealed = EXCLUDED.sealed, updated_at = now()
			RETURNING name, version, created_at, updated_at`, name, version+1, sealed).
			Scan(&info.Name, &info.Version, &info.CreatedAt, &info.UpdatedAt)
	})
	if err != nil {
		return SecretInfo{}, false, fmt.Errorf("set secret %s: %w", name, err)
	}
	return info, created, nil
}

// ListSecrets returns every secret's name, version and times, by name;
// at most the limit SetSecret enforces.
func (s *Store) ListSecrets(ctx context.Context) ([]SecretInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, version, created_at, updated_at FROM secrets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SecretInfo, error) {
		var i SecretInfo
		err := r.Scan(&i.Name, &i.Version, &i.CreatedAt, &i.UpdatedAt)
		return i, err
	})
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	return out, nil
}

// DeleteSecret deletes the secret name. A TI claimed later whose env
// names it fails with reason secret_missing. Errors: ErrNotFound.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE secrets IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM secrets WHERE name = $1`, name)
		if err == nil && tag.RowsAffected() == 0 {
			err = fmt.Errorf("secret %s: %w", name, ErrNotFound)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete secret: %w", err)
	}
	return nil
}

// SealedSecrets reads the named secrets as stored, by name; a name with no
// secret is absent from the map.
func (s *Store) SealedSecrets(ctx context.Context, names []string) (map[string]SealedSecret, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, version, sealed FROM secrets WHERE name = ANY ($1)`, names)
	if err != nil {
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SealedSecret, error) {
		var sec SealedSecret
		err := r.Scan(&sec.Name, &sec.Version, &sec.Sealed)
		return sec, err
	})
	if err != nil {
		return nil, fmt.Errorf("read secrets: %w", err)
	}
	out := make(map[string]SealedSecret, len(list))
	for _, sec := range list {
		out[sec.Name] = sec
	}
	return out, nil
}

// MissingSecretsError refuses a DAG that names secrets that do not
// exist: each reference, with its task and variable.
type MissingSecretsError struct {
	DAGID string
	Uses  []dag.SecretUse
}

func (e *MissingSecretsError) Error() string {
	lines := make([]string, len(e.Uses))
	for i, u := range e.Uses {
		lines[i] = fmt.Sprintf("dag %q: %s: no such secret (create it with `vigil secrets set %s`)", e.DAGID, u, u.Secret)
	}
	return strings.Join(lines, "\n")
}

// checkSecretRefs returns a *MissingSecretsError for the references of
// spec to names that no secret has, locking the rows of those that exist
// (FOR KEY SHARE) until tx ends.
func checkSecretRefs(ctx context.Context, tx pgx.Tx, spec *dag.Spec, names []string) error {
	rows, err := tx.Query(ctx, `SELECT name FROM secrets WHERE name = ANY ($1) FOR KEY SHARE`, names)
	if err != nil {
		return fmt.Errorf("apply dag %q: check secrets: %w", spec.DAGID, err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("apply dag %q: check secrets: %w", spec.DAGID, err)
	}
	var missing []dag.SecretUse
	for _, u := range spec.SecretUses() {
		if !slices.Contains(found, u.Secret) {
			missing = append(missing, u)
		}
	}
	if len(missing) > 0 {
		return &MissingSecretsError{DAGID: spec.DAGID, Uses: missing}
	}
	return nil
}

// ErrSecretsKey is what CheckSecretsKey returns when the key check stored
// in the database does not open with the caller's key.
var ErrSecretsKey = errors.New("the secrets key differs from the one this database's secrets were sealed with")

// CheckSecretsKey proves the caller holds the key this database's secrets
// were sealed with: it stores the key check newCheck makes on the first
// start with a key, and otherwise passes the stored one to open, which
// returns an error when it does not open. Two replicas starting at once
// agree on one check. With fresh (a key the caller just generated: Lite's
// new data directory on a database it used before) a check that does not
// open is replaced while no secret is stored, since nothing was sealed
// with the old key; a stored secret keeps it an error. Errors:
// ErrSecretsKey (wrapping open's error).
func (s *Store) CheckSecretsKey(ctx context.Context, newCheck func() ([]byte, error), open func([]byte) error, fresh bool) error {
	check, err := newCheck()
	if err != nil {
		return err
	}
	var stored []byte
	// A check another replica inserts while this statement waits on its
	// conflict is not in this statement's snapshot: the second try sees it.
	for try := 0; try < 2; try++ {
		err = s.pool.QueryRow(ctx, `
			WITH ins AS (
			  INSERT INTO secrets_key_check (id, sealed) VALUES (1, $1) ON CONFLICT (id) DO NOTHING RETURNING sealed)
			SELECT sealed FROM ins UNION ALL SELECT sealed FROM secrets_key_check
			 LIMIT 1`, check).Scan(&stored)
		if !errNoRows(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("secrets key check: %w", err)
	}
	if err := open(stored); err != nil {
		if fresh {
			resealed, rerr := s.resealKeyCheck(ctx, check)
			if rerr != nil || resealed {
				return rerr
			}
		}
		return fmt.Errorf("%w: %w", ErrSecretsKey, err)
	}
	return nil
}

// resealKeyCheck replaces the key check with check if no secret is
// stored, and reports whether it did. The share lock on secrets keeps a
// secret from being set under the old key meanwhile.
func (s *Store) resealKeyCheck(ctx context.Context, check []byte) (bool, error) {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE secrets IN SHARE MODE`); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE secrets_key_check SET sealed = $1 WHERE id = 1 AND NOT EXISTS (SELECT 1 FROM secrets)`, check)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("secrets key check: %w", err)
	}
	return n == 1, nil
}

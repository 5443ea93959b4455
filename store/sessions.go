package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SessionCheck reads the database clock and whether the console session
// whose cookie hashes to id was signed out (RevokeSession), in one round
// trip: a request by cookie needs both, after its signature held.
func (s *Store) SessionCheck(ctx context.Context, id []byte) (now time.Time, revoked bool, err error) {
	err = s.pool.QueryRow(ctx,
		`SELECT now(), EXISTS (SELECT 1 FROM session_revocations WHERE id = $1)`, id).Scan(&now, &revoked)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("session check: %w", err)
	}
	return now, revoked, nil
}

// RevokeSession records that the session whose cookie hashes to id,
// valid until expires, was signed out, so that no replica accepts it
// again; it also deletes the records of sessions past their expiry, which
// no replica would accept anyway. Revoking twice is a no-op.
func (s *Store) RevokeSession(ctx context.Context, id []byte, expires time.Time) error {
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			WITH gone AS (DELETE FROM session_revocations WHERE expires_at < now())
			INSERT INTO session_revocations (id, expires_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, expires)
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

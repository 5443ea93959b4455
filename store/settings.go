package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Settings returns every runtime setting (name → value). Settings are
// shared by all replicas: a threshold set through any replica's API is
// what the leader's reapers use (docs/design.md §5 tuning API).
func (s *Store) Settings(ctx context.Context) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, value FROM settings`)
	if err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	out := map[string]string{}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("read settings: %w", err)
		}
		out[k] = v
	}
	return out, rows.Err()
}

// PutSettings upserts every pair in one transaction: all or nothing.
func (s *Store) PutSettings(ctx context.Context, kv map[string]string) error {
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		for k, v := range kv {
			if _, err := tx.Exec(ctx, `
				INSERT INTO settings (name, value) VALUES ($1, $2)
				ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`, k, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write settings: %w", err)
	}
	return nil
}

// DeleteSettings removes the named settings, reverting them to the
// configured values.
func (s *Store) DeleteSettings(ctx context.Context, names ...string) error {
	err := s.writeTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM settings WHERE name = ANY ($1)`, names)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete settings: %w", err)
	}
	return nil
}

package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// ResetTestHoldForTest re-arms the once-per-process EnvTestHookHoldLeaderTx
// hook, so that its test also passes with -count > 1. Test builds only.
func ResetTestHoldForTest() { testHoldTaken.Store(false) }

// MigrateToForTest migrates databaseURL to version (up or down) with the
// embedded migrations. Test builds only.
func MigrateToForTest(ctx context.Context, databaseURL string, version int32) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	m, err := newMigrator(ctx, conn)
	if err != nil {
		return err
	}
	return m.MigrateTo(ctx, version)
}

package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

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

// HoldMainPoolForTest acquires every connection of the main pool and
// returns their release. Test builds only.
func (s *Store) HoldMainPoolForTest(ctx context.Context) (func(), error) {
	var held []interface{ Release() }
	for range s.pool.Config().MaxConns {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			for _, h := range held {
				h.Release()
			}
			return nil, err
		}
		held = append(held, c)
	}
	return func() {
		for _, h := range held {
			h.Release()
		}
	}, nil
}

// Scheduling statements whose plans store tests inspect. Test builds only.
var (
	ResolveSQLForTest          = resolveSQL
	ScheduleQueueSQLForTest    = scheduleQueueSQL
	MaxQueuedPayloadForTest    = maxQueuedPayload
	PruneAgentsSQLForTest      = pruneAgentsSQL
	HeartbeatLockSQLForTest    = heartbeatLockSQL
	HeartbeatRefreshSQLForTest = heartbeatRefreshSQL
	HeartbeatStartSQLForTest   = heartbeatStartSQL
	HeartbeatOldestSQLForTest  = heartbeatOldestSQL
	CompleteSuccessSQLForTest  = completeSuccessSQL
	ListRunsSQLForTest         = listRunsSQL
	RunTIsPageSQLForTest       = runTIsPageSQL
	RunTIsSQLForTest           = runTIsSQL
	RunEventsPageSQLForTest    = runEventsPageSQL
	PlannedEachTimeForTest     = plannedEachTime
)

// UpstreamOutputsSQL and RunOutputsSQL are the outputs statements, for
// their plan test.
const (
	UpstreamOutputsSQL = upstreamOutputsSQL
	RunOutputsSQL      = runOutputsSQL
)

// PoolsForTest returns the main and the heartbeat pool.
func (s *Store) PoolsForTest() (main, heartbeat *pgxpool.Pool) { return s.pool, s.hb }

// BacklogCountCap is backlogCountCap, for the test that pins where
// StaleBacklog's counts saturate. Test builds only.
const BacklogCountCap = backlogCountCap

package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReplicaStatus is one replica's row of replica_status (migration 009):
// what it last reported about itself. Report is the replica's own JSON
// (protocol.ReplicaReport), stored as is; SeenAt is the database clock at
// its last publish.
type ReplicaStatus struct {
	ReplicaID string
	Leading   bool
	Epoch     int64
	Version   string
	StartedAt time.Time
	SeenAt    time.Time
	Report    json.RawMessage
}

// replicaRetention is how long a silent replica's row is kept.
const replicaRetention = 24 * time.Hour

// PublishReplica upserts r's row with seen_at = now() and drops rows
// silent for longer than a day, in one statement. Not fenced: every
// replica, follower or leader, reports only about itself. It returns the
// started_at the row held before (zero for a new row): after a process's
// first publish, any value but its own means another process publishes
// under the same replica id (adr/0025).
func (s *Store) PublishReplica(ctx context.Context, r ReplicaStatus) (time.Time, error) {
	report := r.Report
	if report == nil {
		report = json.RawMessage(`{}`)
	}
	var prev *time.Time
	err := s.pool.QueryRow(ctx, `
		WITH gone AS (DELETE FROM replica_status WHERE seen_at < now() - $7 * interval '1 microsecond' AND replica_id <> $1),
		     prev AS (SELECT started_at FROM replica_status WHERE replica_id = $1)
		INSERT INTO replica_status (replica_id, is_leader, epoch, version, started_at, seen_at, report)
		VALUES ($1, $2, $3, $4, $5, now(), $6)
		ON CONFLICT (replica_id) DO UPDATE
		   SET is_leader = EXCLUDED.is_leader, epoch = EXCLUDED.epoch, version = EXCLUDED.version,
		       started_at = EXCLUDED.started_at, seen_at = now(), report = EXCLUDED.report
		RETURNING (SELECT started_at FROM prev)`,
		r.ReplicaID, r.Leading, r.Epoch, r.Version, r.StartedAt, report, micros(replicaRetention)).Scan(&prev)
	if err != nil {
		return time.Time{}, fmt.Errorf("publish replica %q: %w", r.ReplicaID, err)
	}
	if prev == nil {
		return time.Time{}, nil
	}
	return *prev, nil
}

// ListReplicas returns every replica row seen within the last `within`,
// most recently seen first, and the database clock it was read at.
func (s *Store) ListReplicas(ctx context.Context, within time.Duration) ([]ReplicaStatus, time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return nil, now, fmt.Errorf("list replicas: %w", err)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT replica_id, is_leader, epoch, version, started_at, seen_at, report
		  FROM replica_status WHERE seen_at > $1::timestamptz - $2 * interval '1 microsecond'
		 ORDER BY is_leader DESC, seen_at DESC, replica_id`, now, micros(within))
	if err != nil {
		return nil, now, fmt.Errorf("list replicas: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReplicaStatus, error) {
		var c ReplicaStatus
		err := r.Scan(&c.ReplicaID, &c.Leading, &c.Epoch, &c.Version, &c.StartedAt, &c.SeenAt, &c.Report)
		return c, err
	})
	if err != nil {
		return nil, now, fmt.Errorf("list replicas: %w", err)
	}
	return list, now, nil
}

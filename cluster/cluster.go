// Package cluster publishes what each replica knows about itself to the
// database (store.PublishReplica, migration 009), so that any replica can
// show the whole cluster: GET /v1/cluster and the console's Cluster page
// read it back (docs/console.md). Leader and followers alike publish.
package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/store"
)

// DefaultEvery is how often a replica publishes its row.
const DefaultEvery = 2 * time.Second

// SeenWithin is how recently a replica must have published to be listed
// as part of the cluster (GET /v1/cluster).
const SeenWithin = time.Minute

// Publisher upserts this replica's row every Every. Store, Status and
// Report are required.
type Publisher struct {
	Store   *store.Store
	Status  func() leader.Status          // leadership as this replica sees it
	Report  func() protocol.ReplicaReport // the scheduler's part (scheduler.Scheduler.Report)
	Version string
	Every   time.Duration // default DefaultEvery
	Logger  *slog.Logger
	// published: this Publisher's row is in the table, so a started_at
	// other than its own found there was written by another process.
	published bool
}

// Run publishes at once and then every Every until ctx ends. A failed
// publish is logged and retried at the next tick: the row only informs.
func (p *Publisher) Run(ctx context.Context) error {
	if p.Store == nil || p.Status == nil || p.Report == nil {
		return errors.New("cluster: Store, Status and Report are required")
	}
	every := p.Every
	if every <= 0 {
		every = DefaultEvery
	}
	log := p.logger()
	started, err := p.Store.Now(ctx)
	if err != nil {
		started = time.Now() // the row's started_at only; retried rows keep it
	}
	started = started.Truncate(time.Microsecond).Round(0) // as stored, so that Publish recognises its own
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := p.Publish(ctx, started); err != nil && ctx.Err() == nil {
			log.Warn("replica status not published; next tick retries", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *Publisher) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}

// Publish upserts this replica's row once; started is its started_at
// (microsecond precision, as stored). When the row it replaced was
// written by another process (another started_at after this Publisher's
// first publish), two live processes share the replica id: it logs an
// error naming --replica-id each time it sees one, and goes on
// (adr/0025-duplicate-replica-id-logged.md).
func (p *Publisher) Publish(ctx context.Context, started time.Time) error {
	st := p.Status()
	report, err := json.Marshal(p.Report())
	if err != nil {
		return err
	}
	version := p.Version
	if version == "" {
		version = "dev"
	}
	prev, err := p.Store.PublishReplica(ctx, store.ReplicaStatus{
		ReplicaID: st.Self, Leading: st.Leading, Epoch: st.Epoch, Version: version, StartedAt: started, Report: report,
	})
	if err != nil {
		return err
	}
	if p.published && !prev.IsZero() && !prev.Equal(started) {
		p.logger().Error("another live process publishes as this replica: --replica-id must name one process",
			"flag", "--replica-id", "replica_id", st.Self, "started_at", started, "other_started_at", prev)
	}
	p.published = true
	return nil
}

// Read assembles GET /v1/cluster from the database: the fence's holder
// and epoch, and every replica seen within SeenWithin, each with its
// report. self names the replica answering.
func Read(ctx context.Context, st *store.Store, self string) (protocol.Cluster, error) {
	epoch, holder, err := st.Fence(ctx)
	if err != nil {
		return protocol.Cluster{}, err
	}
	rows, now, err := st.ListReplicas(ctx, SeenWithin)
	if err != nil {
		return protocol.Cluster{}, err
	}
	out := protocol.Cluster{Now: now, Leader: holder, Epoch: epoch, Self: self, Replicas: []protocol.Replica{}}
	for _, r := range rows {
		rep := protocol.Replica{ReplicaID: r.ReplicaID, Leading: r.Leading, Epoch: r.Epoch, Version: r.Version,
			StartedAt: r.StartedAt, SeenAt: r.SeenAt, SeenAgo: protocol.Duration(max(now.Sub(r.SeenAt), 0))}
		if err := json.Unmarshal(r.Report, &rep.ReplicaReport); err != nil {
			return out, err
		}
		if rep.Reapers == nil {
			rep.Reapers = []protocol.ReaperSweep{}
		}
		if rep.Decisions == nil {
			rep.Decisions = map[string]int64{}
		}
		out.Replicas = append(out.Replicas, rep)
	}
	return out, nil
}

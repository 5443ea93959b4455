// Package cluster publishes what each replica knows about itself to the
// database (store.PublishReplica, migration 009), so that any replica can
// show the whole cluster: GET /v1/cluster and the console's Cluster page
// read it back (docs/console.md). Leader and followers alike publish.
package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/maintenance"
	"github.com/vigil-sched/vigil/store"
)

// DefaultEvery is how often a replica publishes its row.
const DefaultEvery = 2 * time.Second

// SeenWithin is how recently a replica must have published to be listed
// as part of the cluster (GET /v1/cluster).
const SeenWithin = time.Minute

// ServicePublish names the publisher's maintenance service.
const ServicePublish = "cluster_publish"

// Config configures a Publisher. Store, Status and Report are required.
type Config struct {
	Store  *store.Store
	Status func() leader.Status // leadership as this replica sees it
	// Report is the scheduler's part, stored as its JSON and shown as is
	// by GET /v1/cluster: the wire's shape (api.ReplicaReport of
	// scheduler.Scheduler.Report), which this package does not know.
	Report  func() any
	Version string        // default "dev"
	Every   time.Duration // time between publishes; default DefaultEvery
	Logger  *slog.Logger  // default slog.Default()
}

// Publisher upserts this replica's row every Every, on leader and
// followers alike, as a maintenance service of its own.
type Publisher struct {
	cfg Config
	// started is this process's started_at (microsecond precision, as
	// stored), read from the database clock by the first pass.
	started time.Time
	// published: this Publisher's row is in the table, so a started_at
	// other than its own found there was written by another process.
	published bool
}

// NewPublisher fills cfg's zero fields with the defaults. Errors: a
// missing Store, Status or Report.
func NewPublisher(cfg Config) (*Publisher, error) {
	if cfg.Store == nil || cfg.Status == nil || cfg.Report == nil {
		return nil, errors.New("cluster: Store, Status and Report are required")
	}
	cfg.Version = cmp.Or(cfg.Version, "dev")
	cfg.Every = cmp.Or(cfg.Every, DefaultEvery)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return &Publisher{cfg: cfg}, nil
}

// Run publishes at once and then every Every until ctx ends; it returns
// nil. A failed publish is logged and retried at the next interval: the
// row only informs.
func (p *Publisher) Run(ctx context.Context) error {
	return maintenance.NewGroup(p.cfg.Logger, nil, p.service()).Run(ctx)
}

// service runs runOnce every Every.
func (p *Publisher) service() *maintenance.Service {
	return maintenance.New(maintenance.Config{Name: ServicePublish, Interval: p.cfg.Every}, p.runOnce)
}

// runOnce publishes the row once. The first pass reads started_at from
// the database clock (this process's clock if that fails: it only labels
// the row, and later passes keep it).
func (p *Publisher) runOnce(ctx context.Context) error {
	if p.started.IsZero() {
		started, err := p.cfg.Store.Now(ctx)
		if err != nil {
			started = time.Now()
		}
		p.started = started.Truncate(time.Microsecond).Round(0) // as stored, so that Publish recognises its own
	}
	return p.Publish(ctx, p.started)
}

// Publish upserts this replica's row once; started is its started_at
// (microsecond precision, as stored). When the row it replaced was
// written by another process (another started_at after this Publisher's
// first publish), two live processes share the replica id: it logs an
// error naming --replica-id each time it sees one, and goes on
// (adr/0025-duplicate-replica-id-logged.md).
func (p *Publisher) Publish(ctx context.Context, started time.Time) error {
	st := p.cfg.Status()
	report, err := json.Marshal(p.cfg.Report())
	if err != nil {
		return err
	}
	prev, err := p.cfg.Store.PublishReplica(ctx, store.ReplicaStatus{
		ReplicaID: st.Self, Leading: st.Leading, Epoch: st.Epoch, Version: p.cfg.Version, StartedAt: started, Report: report,
	})
	if err != nil {
		return err
	}
	if p.published && !prev.IsZero() && !prev.Equal(started) {
		p.cfg.Logger.Error("another live process publishes as this replica: --replica-id must name one process",
			"flag", "--replica-id", "replica_id", st.Self, "started_at", started, "other_started_at", prev)
	}
	p.published = true
	return nil
}

// View is the cluster as the database shows it (GET /v1/cluster): the
// fence's holder (Leader) and epoch at Now, the database clock, and every
// replica seen within SeenWithin. Self names the replica answering.
type View struct {
	Now      time.Time
	Leader   string
	Epoch    int64
	Self     string
	Replicas []Replica
}

// Replica is one replica's last published row and SeenAgo, how long ago
// that was on the database clock (never negative). Report is the JSON its
// publisher's Config.Report gave.
type Replica struct {
	ReplicaID string
	Leading   bool
	Epoch     int64
	Version   string
	StartedAt time.Time
	SeenAt    time.Time
	SeenAgo   time.Duration
	Report    json.RawMessage
}

// Read assembles the View from the database; self names the replica
// answering.
func Read(ctx context.Context, st *store.Store, self string) (View, error) {
	epoch, holder, err := st.Fence(ctx)
	if err != nil {
		return View{}, err
	}
	rows, now, err := st.ListReplicas(ctx, SeenWithin)
	if err != nil {
		return View{}, err
	}
	out := View{Now: now, Leader: holder, Epoch: epoch, Self: self}
	for _, r := range rows {
		out.Replicas = append(out.Replicas, Replica{ReplicaID: r.ReplicaID, Leading: r.Leading, Epoch: r.Epoch,
			Version: r.Version, StartedAt: r.StartedAt, SeenAt: r.SeenAt, SeenAgo: max(now.Sub(r.SeenAt), 0),
			Report: json.RawMessage(r.Report)})
	}
	return out, nil
}

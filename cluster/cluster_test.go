package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/cluster"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// Two replicas publish; any reader sees both, the leader first, each with
// the report it published; the fence names the leader and its epoch; a
// replica silent for longer than SeenWithin is no longer listed.
func TestReadShowsEveryReplicaFromTheDatabase(t *testing.T) {
	ctx := context.Background()
	url := storetest.DB(t)
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	epoch, err := st.AcquireFenceIn(ctx, store.FenceDomainEtcd, 7, "replica-a")
	require.NoError(t, err)

	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	sweep := protocol.ReaperSweep{Reaper: "agent_lost", At: at, Duration: protocol.Duration(3 * time.Millisecond), Candidates: 2, Applied: 1}
	publish := func(self string, leading bool, rep protocol.ReplicaReport) {
		p, err := cluster.NewPublisher(cluster.Config{Store: st, Version: "v-test",
			Status: func() leader.Status { return leader.Status{Self: self, Leading: leading, Epoch: epoch} },
			Report: func() any { return rep }})
		require.NoError(t, err)
		require.NoError(t, p.Publish(ctx, at))
	}
	publish("replica-b", false, protocol.ReplicaReport{Decisions: map[string]int64{"agent_lost": 0}})
	publish("replica-a", true, protocol.ReplicaReport{Reapers: []protocol.ReaperSweep{sweep},
		Decisions: map[string]int64{"agent_lost": 4}, GraceStart: &at, BrakeEngaged: true, BrakeMessage: "held"})

	got, err := cluster.Read(ctx, st, "replica-b")
	require.NoError(t, err)
	assert.Equal(t, "replica-a", got.Leader)
	assert.Equal(t, epoch, got.Epoch)
	assert.Equal(t, "replica-b", got.Self)
	require.Len(t, got.Replicas, 2)
	a, b := got.Replicas[0], got.Replicas[1]
	assert.Equal(t, "replica-a", a.ReplicaID, "the leader first")
	assert.True(t, a.Leading)
	var aRep, bRep protocol.ReplicaReport
	require.NoError(t, json.Unmarshal(a.Report, &aRep))
	require.NoError(t, json.Unmarshal(b.Report, &bRep))
	assert.Equal(t, []protocol.ReaperSweep{sweep}, aRep.Reapers, "the report as published")
	assert.Equal(t, int64(4), aRep.Decisions["agent_lost"])
	assert.True(t, aRep.BrakeEngaged)
	assert.Equal(t, "v-test", a.Version)
	assert.Equal(t, "replica-b", b.ReplicaID)
	assert.Empty(t, bRep.Reapers)
	assert.Less(t, b.SeenAgo, 10*time.Second)

	// replica-b goes silent past SeenWithin: it drops out of the list.
	db, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer db.Close(ctx)
	_, err = db.Exec(ctx, `UPDATE replica_status SET seen_at = now() - interval '2 minutes' WHERE replica_id = 'replica-b'`)
	require.NoError(t, err)
	got, err = cluster.Read(ctx, st, "replica-a")
	require.NoError(t, err)
	require.Len(t, got.Replicas, 1)
	assert.Equal(t, "replica-a", got.Replicas[0].ReplicaID)
}

// Two live processes publish under one replica id (a supervisor started
// it twice): each logs an error naming --replica-id once it sees the
// other's row. A process that replaces a dead one (a restart after a
// crash) finds its predecessor's row at its first publish only, and
// logs nothing.
func TestASecondLiveProcessUnderOneReplicaIDIsLogged(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.DB(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	type proc struct {
		p       *cluster.Publisher
		log     *bytes.Buffer
		started time.Time
	}
	start := func(at time.Time) proc {
		var buf bytes.Buffer
		p, err := cluster.NewPublisher(cluster.Config{Store: st, Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
			Status: func() leader.Status { return leader.Status{Self: "r2"} },
			Report: func() any { return protocol.ReplicaReport{} }})
		require.NoError(t, err)
		return proc{p, &buf, at}
	}
	publish := func(pr proc) { require.NoError(t, pr.p.Publish(ctx, pr.started)) }
	t1 := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

	crashed, restarted := start(t1), start(t1.Add(3*time.Second))
	publish(crashed)
	publish(restarted)
	publish(restarted)
	assert.Empty(t, crashed.log.String()+restarted.log.String(), "a restart after a crash is no duplicate")

	leaked := start(t1.Add(5 * time.Second)) // started while restarted lives on
	publish(leaked)
	assert.Empty(t, leaked.log.String(), "its first publish cannot tell a live predecessor from a dead one")
	publish(restarted)
	publish(leaked)
	for _, pr := range []proc{restarted, leaked} {
		assert.Contains(t, pr.log.String(), `"level":"ERROR"`)
		assert.Contains(t, pr.log.String(), `"flag":"--replica-id","replica_id":"r2"`)
		assert.Equal(t, 1, strings.Count(pr.log.String(), "\n"), "one error per publish that saw the other")
	}
}

// The publisher's pass stamps started_at from the database clock at its
// first pass and keeps it, refreshes seen_at and the leadership it reads
// each pass, and never takes its own earlier row for another process's.
func TestPublisherPassKeepsItsStartedAt(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.DB(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	var buf bytes.Buffer
	status := leader.Status{Self: "r1"}
	p, err := cluster.NewPublisher(cluster.Config{Store: st, Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
		Status: func() leader.Status { return status },
		Report: func() any { return protocol.ReplicaReport{} }})
	require.NoError(t, err)
	cfg := p.ConfigForTest()
	assert.Equal(t, cluster.DefaultEvery, cfg.Every)
	assert.Equal(t, "dev", cfg.Version)

	before, err := st.Now(ctx)
	require.NoError(t, err)
	require.NoError(t, p.RunOnceForTest(ctx))
	started := p.StartedForTest()
	assert.False(t, started.Before(before.Truncate(time.Microsecond)), "started_at is read from the database clock")
	status = leader.Status{Self: "r1", Leading: true, Epoch: 3}
	require.NoError(t, p.RunOnceForTest(ctx))
	assert.Equal(t, started, p.StartedForTest(), "later passes keep started_at")

	got, err := cluster.Read(ctx, st, "r1")
	require.NoError(t, err)
	require.Len(t, got.Replicas, 1)
	r := got.Replicas[0]
	assert.True(t, r.Leading)
	assert.Equal(t, int64(3), r.Epoch)
	assert.True(t, r.StartedAt.Equal(started), "the row carries this process's started_at: %s vs %s", r.StartedAt, started)
	assert.Equal(t, "dev", r.Version)
	assert.Empty(t, buf.String(), "its own row is no duplicate")

	_, err = cluster.NewPublisher(cluster.Config{Store: st})
	assert.ErrorContains(t, err, "Store, Status and Report are required")
}

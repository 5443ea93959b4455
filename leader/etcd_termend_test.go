package leader

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigil-sched/vigil/internal/testlog"
	"github.com/vigil-sched/vigil/leader/etcdtest"
)

// Leader work that returns while its term lasts ends the term ("leader
// work returned"), and Run campaigns again, saying why: the work's error,
// or that it returned while still leading.
func TestEtcdWorkReturningWhileLeadingEndsTheTerm(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	eps := etcdtest.Start(t)
	var terms atomic.Int32
	third := make(chan struct{})
	r := startReplica(t, eps, st, "r1", func(ctx context.Context, _ Term) error {
		switch terms.Add(1) {
		case 1:
			return nil
		case 2:
			return errors.New("boom")
		case 3:
			close(third)
		}
		<-ctx.Done()
		return nil
	})
	select {
	case <-third:
	case <-time.After(30 * time.Second):
		t.Fatalf("no third term within 30s; logs:\n%s", r.logs.String())
	}
	assert.NoError(t, <-r.stopped, "the first term's work returned nil")
	assert.EqualError(t, <-r.stopped, "boom", "the second term's work failed")
	logs := r.logs.String()
	assert.Regexp(t, `err="leader work of epoch \d+ returned while still leading"`, logs)
	assert.Regexp(t, `err="leader work of epoch \d+ failed: boom"`, logs)
	assert.Regexp(t, `err="leader work of epoch \d+ failed: boom" backoff=400ms`, logs, "the backoff doubles after each failure")
	assert.Regexp(t, `msg="stopped leading" .*epoch=\d+ reason="leader work returned"`, logs)
}

// A term ended by Run's context says it is shutting down, and Run
// returns nil.
func TestEtcdTermEndedByItsContextIsAShutdown(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	logs := &testlog.Buffer{}
	e, err := NewEtcd(EtcdConfig{Client: etcdtest.NewClient(t, etcdtest.Start(t)), Store: st, Self: "r1", TTL: testTTL,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leading := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, Callbacks{OnStartedLeading: func(ctx context.Context, _ Term) error {
			close(leading)
			<-ctx.Done()
			return nil
		}})
	}()
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatalf("not leading within 30s; logs:\n%s", logs.String())
	}
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return within 30s of its context's end; logs:\n%s", logs.String())
	}
	assert.Contains(t, logs.String(), `reason="shutting down"`)
}

// A follower whose lease is lost while it campaigns says so and campaigns
// again on a new session, rather than failing the candidacy.
func TestEtcdFollowerLosingItsLeaseWhileCampaigningCampaignsAgain(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	eps := etcdtest.Start(t)
	admin := etcdtest.NewClient(t, eps)
	r1 := startReplica(t, eps, st, "r1", fencedWork(st))
	waitLeader(t, []*replica{r1}, nil, 30*time.Second)
	r2 := startReplica(t, eps, st, "r2", fencedWork(st))
	ctx := context.Background()
	// campaigning returns r2's election key's lease once it has one
	campaigning := func() clientv3.LeaseID {
		resp, err := admin.Get(ctx, DefaultEtcdPrefix+"/", clientv3.WithPrefix())
		require.NoError(t, err)
		for _, kv := range resp.Kvs {
			if string(kv.Value) == "r2" {
				return clientv3.LeaseID(kv.Lease)
			}
		}
		return 0
	}
	until := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			require.True(t, time.Now().Before(deadline), "%s within 30s; logs of r2:\n%s", what, r2.logs.String())
			time.Sleep(10 * time.Millisecond)
		}
	}
	var first clientv3.LeaseID
	until("r2 campaigns", func() bool { first = campaigning(); return first != 0 })
	_, err := admin.Revoke(ctx, first)
	require.NoError(t, err)
	until("r2 notices its lost lease", func() bool {
		return strings.Contains(r2.logs.String(), "session lease expired while campaigning; campaigning again on a new session")
	})
	until("r2 campaigns on a new lease", func() bool { l := campaigning(); return l != 0 && l != first })
	assert.True(t, r1.e.Status().Leading, "r1 kept leading")
	assert.NotContains(t, r2.logs.String(), "campaigning again after a failure", "a lost lease is not a failure")
}

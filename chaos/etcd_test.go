package chaos

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The chaos cluster's etcd: three embedded members behind their peer
// gates. A follower cut off from its peers cannot serve a linearizable
// read while the other two can, and serves again once reconnected; the
// raft leader cut off is replaced; a killed member is out until started
// again. Each wait is for a positive signal.
func TestEtcdClusterMemberFaults(t *testing.T) {
	t.Parallel()
	ec, err := startEtcdCluster(t.TempDir())
	t.Cleanup(func() { ec.stopAll(true) })
	require.NoError(t, err)
	all := etcdClient(t, ec.clientURLs()...)
	ctx := context.Background()
	_, err = all.Put(ctx, "k", "v0")
	require.NoError(t, err)

	readable := func(cli *clientv3.Client) bool {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := cli.Get(qctx, "k")
		return err == nil
	}
	leader := func() *etcdMember {
		for _, m := range ec.members {
			if ec.role(m) == etcdRaftLeader {
				return m
			}
		}
		return nil
	}
	var lead *etcdMember
	require.Eventually(t, func() bool { lead = leader(); return lead != nil }, 10*time.Second, 50*time.Millisecond)
	var follower *etcdMember
	for _, m := range ec.members {
		if m != lead {
			follower = m
		}
	}
	alone := etcdClient(t, follower.client.String())
	require.True(t, readable(alone))

	ec.isolate(follower, true)
	require.Eventually(t, func() bool { return !readable(alone) }, 15*time.Second, 100*time.Millisecond,
		"the isolated follower %s still serves linearizable reads", follower.name)
	putVia(t, others(ec, follower), "v1", "the other two keep a quorum")
	ec.isolate(follower, false)
	require.Eventually(t, func() bool { return readable(alone) }, 15*time.Second, 100*time.Millisecond)

	ec.isolate(lead, true)
	require.Eventually(t, func() bool { l := leader(); return l != nil && l != lead }, 15*time.Second, 50*time.Millisecond,
		"no other member took over from the isolated raft leader %s", lead.name)
	ec.isolate(lead, false)

	// The isolation above moved the raft leadership: stop a member that
	// follows now, once a leader is back.
	require.Eventually(t, func() bool { lead = leader(); return lead != nil }, 15*time.Second, 50*time.Millisecond)
	for _, m := range ec.members {
		if m != lead {
			follower = m
		}
	}
	alone = etcdClient(t, follower.client.String())
	// A kill ends the member's client connections at once, before its
	// server's graceful close (which waits up to 7 s on open streams):
	// a connection made before the stop reads EOF, not a deadline.
	raw, err := net.Dial("tcp", follower.client.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	var readErr error
	ec.beforeClose = func(m *etcdMember) {
		if m != follower || readErr != nil {
			return
		}
		require.NoError(t, raw.SetReadDeadline(time.Now().Add(2*time.Second)))
		_, readErr = raw.Read(make([]byte, 1))
		_ = raw.Close() // else Close would wait on it (its protocol never sent)
	}
	ec.stop(follower)
	var ne net.Error
	require.Error(t, readErr)
	assert.False(t, errors.As(readErr, &ne) && ne.Timeout(),
		"a killed member's client connection is closed before its server's graceful close: %v", readErr)
	assert.Equal(t, etcdFollower, ec.role(follower), "a stopped member leads nothing")
	putVia(t, others(ec, follower), "v2", "two of three members keep a quorum")
	require.NoError(t, ec.start(follower))
	require.Eventually(t, func() bool { return readable(alone) }, 15*time.Second, 100*time.Millisecond)
	resp, err := alone.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "v2", string(resp.Kvs[0].Value), "the restarted member caught up")
}

func etcdClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// others is a client of every member but m.
func others(ec *etcdCluster, m *etcdMember) []string {
	var out []string
	for _, o := range ec.members {
		if o != m {
			out = append(out, o.client.String())
		}
	}
	return out
}

// putVia writes k = v through endpoints, waiting (at most 20 s, each try
// 2 s) for a leader among them: an election may be under way.
func putVia(t *testing.T, endpoints []string, v, msg string) {
	t.Helper()
	cli := etcdClient(t, endpoints...)
	var err error
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = cli.Put(ctx, "k", v)
		return err == nil
	}, 20*time.Second, 100*time.Millisecond, "%s: %v", msg, err)
}

// Package etcdtest runs a real, single-member etcd server inside the test
// process, so that tests of the Pro elector (docs/design.md §8) use etcd itself
// rather than a fake (docs/design.md §11: real dependencies only).
//
// Each Start call gets its own server: its own data directory under
// t.TempDir(), its own loopback ports and its own member name, so tests
// that call it may run with t.Parallel().
//
// Usage:
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		endpoints := etcdtest.Start(t)
//		cli := etcdtest.NewClient(t, endpoints)
//		...
//	}
package etcdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Timeouts of the helpers.
const (
	// ReadyTimeout bounds how long Start waits for the server to serve.
	ReadyTimeout = 30 * time.Second
	// DialTimeout is the dial timeout of the clients NewClient returns.
	DialTimeout = 2 * time.Second
	// stopTimeout bounds how long the cleanup waits for the server to stop.
	stopTimeout = 30 * time.Second
	// startAttempts: a free port picked by the kernel can be taken by
	// someone else before etcd binds it; Start then retries on new ports.
	startAttempts = 3
)

// Start starts a single-member etcd server listening on 127.0.0.1 (client
// and peer URLs on free ports), waits until it serves (at most
// ReadyTimeout), registers a t.Cleanup that stops it, and returns its
// client endpoints ("http://127.0.0.1:PORT"). The server logs only errors,
// to stderr. Any failure fails t.
func Start(t testing.TB) (endpoints []string) {
	t.Helper()
	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		s, err := start(t)
		if err != nil {
			lastErr = err
			continue
		}
		t.Cleanup(func() { stop(t, s) })
		for _, u := range s.e.Config().AdvertiseClientUrls {
			endpoints = append(endpoints, u.String())
		}
		return endpoints
	}
	t.Fatalf("etcdtest: start embedded etcd (%d attempts): %v", startAttempts, lastErr)
	return nil
}

// server is a running embedded etcd and the level of its logger.
type server struct {
	e     *embed.Etcd
	level zap.AtomicLevel
}

func start(t testing.TB) (*server, error) {
	clientURL, err := freeURL()
	if err != nil {
		return nil, err
	}
	peerURL, err := freeURL()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest-" + randHex(6)
	cfg.Dir = t.TempDir()
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.InitialClusterToken = cfg.Name
	// Errors go to stderr while the server runs; stop raises the level so
	// that the listeners' "server closed" errors of a normal shutdown are
	// not printed.
	level := zap.NewAtomicLevelAt(zap.ErrorLevel)
	zcfg := zap.NewProductionConfig()
	zcfg.Level = level
	zcfg.Sampling = nil
	zcfg.OutputPaths, zcfg.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	lg, err := zcfg.Build()
	if err != nil {
		return nil, fmt.Errorf("etcd logger: %w", err)
	}
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	cfg.UnsafeNoFsync = true // throwaway data; fsync only slows tests down

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return &server{e: e, level: level}, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed before it was ready: %v", err)
	case <-time.After(ReadyTimeout):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready after %v", ReadyTimeout)
	}
}

func stop(t testing.TB, s *server) {
	s.level.SetLevel(zap.FatalLevel)
	e := s.e
	done := make(chan struct{})
	go func() {
		e.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopTimeout):
		t.Errorf("etcdtest: embedded etcd did not stop within %v", stopTimeout)
	}
}

// NewClient returns a client of the servers at endpoints with a DialTimeout
// dial timeout and a no-op logger, and registers a t.Cleanup that closes
// it. It fails t when the server does not answer within DialTimeout.
func NewClient(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: DialTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcdtest: new client for %v: %v", endpoints, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	defer cancel()
	if _, err := cli.Get(ctx, "etcdtest-ping"); err != nil {
		t.Fatalf("etcdtest: client for %v: %v", endpoints, err)
	}
	return cli
}

// freeURL returns http://127.0.0.1:PORT for a port that was free a moment
// ago.
func freeURL() (*url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	return &url.URL{Scheme: "http", Host: addr}, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

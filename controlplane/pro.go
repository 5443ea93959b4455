package controlplane

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
)

// proElector connects to etcd (Stop closes the client) and returns how to
// build the replica's etcd elector.
func (c *ControlPlane) proElector(cfg Config, st *store.Store) (func(*metrics.Metrics) (leader.Elector, error), error) {
	p := cfg.Pro
	etcd, err := clientv3.New(clientv3.Config{
		Endpoints: p.Endpoints, DialTimeout: etcdDialTimeout, TLS: p.TLS,
		Username: p.Username, Password: p.Password, Logger: nil,
	})
	if err != nil {
		return nil, fieldError("Pro.Endpoints", err, "")
	}
	c.onStop(func(context.Context) error { _ = etcd.Close(); return nil })
	return func(m *metrics.Metrics) (leader.Elector, error) {
		return leader.NewEtcd(leader.EtcdConfig{
			Client: etcd, Store: st, Self: p.ReplicaID, TTL: p.ElectionTTL, Logger: cfg.Logger, Metrics: m,
		})
	}, nil
}

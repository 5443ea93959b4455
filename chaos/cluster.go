package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/vigil-sched/vigil/store/pgcluster"
)

// Tokens of the chaos cluster (loopback only).
const (
	agentToken    = "chaos-agent-token"
	operatorToken = "chaos-operator-token"
)

// cluster is the real Pro cluster under test: an embedded etcd, a private
// PostgreSQL, three `vigil server` replicas and agent processes, every
// replica's database link and every agent's link to every replica
// through its own toxiproxy proxy.
type cluster struct {
	cfg   Config
	dir   string
	tox   *toxiproxy.ApiServer
	rec   *recorder
	mu    sync.Mutex // guards etcd and pg
	etcd  *etcdCluster
	pg    *pgcluster.Cluster
	pgCfg pgcluster.Config
	// pat, with Config.Patroni, is the Patroni pair in place of pg.
	pat      *patroniPair
	replicas []*replica
	agents   []*agentSlot
	// procMu guards every procSlot's fields, procs and stopping.
	procMu sync.Mutex
	// procs is every process the harness ever started, oldest first:
	// stop ends each one by pid.
	procs []*proc
	// stopping: the cluster is being stopped; nothing starts any more.
	stopping bool
	// restarted, when set (tests), is called after the supervisor
	// restarted a slot.
	restarted func(slot string)
}

// replica is one `vigil server`.
type replica struct {
	id   string
	url  string // direct, for the operator and the harness
	args []string
	// dbProxies are its links to PostgreSQL, one per database host.
	dbProxies []*toxiproxy.Proxy
	// etcdProxies are its links to the etcd members, one each, in
	// --etcd-endpoints: a leader_etcd_cut stops them.
	etcdProxies []*toxiproxy.Proxy
	procSlot
	starts int
}

// agentSlot is one agent position: the process currently in it, its
// links (one proxy per replica) and its tags.
type agentSlot struct {
	slot  int
	name  string
	tags  []string
	links []*toxiproxy.Proxy
	procSlot
	instance string
	starts   int
	// skew offsets its agents' wall clock (AgentSkews); zero: none.
	skew time.Duration
}

// agentTags gives every required tag set two agents or more, so one
// impaired agent never starves a task (see workload.go).
var agentTags = [][]string{{"gpu"}, {"gpu", "ssd"}, {"ssd"}, {}, {"gpu"}, {"ssd"}}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startCluster starts everything and waits for a leader.
func startCluster(ctx context.Context, cfg Config, rec *recorder) (*cluster, error) {
	c := &cluster{cfg: cfg, dir: cfg.WorkDir, rec: rec}
	logger := zerolog.Nop()
	c.tox = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), logger)
	if err := c.startEtcd(); err != nil {
		return c, err
	}
	if cfg.Patroni {
		if err := c.startPatroni(ctx); err != nil {
			return c, err
		}
	} else if err := c.startPostgres(ctx); err != nil {
		return c, err
	}
	for i := 1; i <= 3; i++ {
		if err := c.addReplica(i); err != nil {
			return c, err
		}
	}
	if err := c.waitServing(ctx); err != nil {
		return c, err
	}
	if err := installFenceHistory(ctx, c.directURL()); err != nil {
		return c, err
	}
	for i := 0; i < cfg.Agents; i++ {
		if err := c.addAgent(i); err != nil {
			return c, err
		}
	}
	return c, nil
}

// startPatroni starts the Patroni pair on the etcd members
// (docs/reliability.md, "Patroni").
func (c *cluster) startPatroni(ctx context.Context) error {
	if err := os.Chmod(c.dir, 0o711); err != nil { // the postgres user runs PostgreSQL below it
		return err
	}
	var hosts []string
	for _, u := range c.etcd.clientURLs() {
		hosts = append(hosts, strings.TrimPrefix(u, "http://"))
	}
	pp, err := startPatroni(ctx, filepath.Join(c.dir, "patroni"), c.tmpRoot(), hosts)
	c.pat = pp
	return err
}

// dbHosts lists PostgreSQL's host:port addresses: the private
// cluster's, or each Patroni node's.
func (c *cluster) dbHosts() []string {
	if c.pat != nil {
		return c.pat.hosts()
	}
	return []string{fmt.Sprintf("127.0.0.1:%d", c.pg.Port())}
}

func (c *cluster) startEtcd() error {
	ec, err := startEtcdCluster(c.dir)
	c.etcd = ec
	return err
}

// stopEtcd stops every etcd member for good.
func (c *cluster) stopEtcd() {
	if c.etcd != nil {
		c.etcd.stopAll(true)
		c.etcd = nil
	}
}

// startPostgres starts the private cluster, durable (a crash must not lose
// a commit: an immediate shutdown is one of the faults) and with commit
// timestamps on, which the fencing check reads.
func (c *cluster) startPostgres(ctx context.Context) error {
	c.pgCfg = pgcluster.Config{Dir: filepath.Join(c.dir, "pg")}
	pg, err := pgcluster.Start(ctx, c.pgCfg)
	if err != nil {
		return err
	}
	c.pg, c.pgCfg.Port = pg, pg.Port()
	if err := execSQL(ctx, pg.URL(pgcluster.DefaultDBName), `ALTER SYSTEM SET track_commit_timestamp = on`); err != nil {
		return err
	}
	if err := pg.Stop(ctx); err != nil {
		return err
	}
	c.pg, err = pgcluster.Start(ctx, c.pgCfg)
	return err
}

// restartPostgres stops PostgreSQL (fast or immediate) and starts it again
// after hold.
func (c *cluster) restartPostgres(ctx context.Context, immediate bool, hold time.Duration) error {
	var err error
	if immediate {
		err = c.pg.StopImmediate(ctx)
	} else {
		err = c.pg.Stop(ctx)
	}
	if err != nil {
		return err
	}
	time.Sleep(hold)
	c.pg, err = pgcluster.Start(ctx, c.pgCfg)
	return err
}

// proxy creates and starts a toxiproxy proxy to upstream.
func (c *cluster) proxy(name, upstream string) (*toxiproxy.Proxy, error) {
	p := toxiproxy.NewProxy(c.tox, name, "127.0.0.1:0", upstream)
	if err := c.tox.Collection.Add(p, true); err != nil {
		return nil, fmt.Errorf("proxy %s: %w", name, err)
	}
	return p, nil
}

func (c *cluster) addReplica(i int) error {
	id := fmt.Sprintf("r%d", i)
	var dbProxies []*toxiproxy.Proxy
	var dbHosts []string
	for i, host := range c.dbHosts() {
		p, err := c.proxy(fmt.Sprintf("db-%s-%d", id, i+1), host)
		if err != nil {
			return err
		}
		dbProxies = append(dbProxies, p)
		dbHosts = append(dbHosts, p.Listen)
	}
	var etcdProxies []*toxiproxy.Proxy
	var endpoints []string
	for _, m := range c.etcd.members {
		p, err := c.proxy(fmt.Sprintf("etcd-%s-%s", id, m.name), m.client.Host)
		if err != nil {
			return err
		}
		etcdProxies = append(etcdProxies, p)
		endpoints = append(endpoints, "http://"+p.Listen)
	}
	listen, err := freeAddr()
	if err != nil {
		return err
	}
	t := c.cfg.Timing
	dbURL := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", pgcluster.User, dbHosts[0], pgcluster.DefaultDBName)
	if c.pat != nil {
		dbURL = c.pat.url(dbHosts, pgcluster.User, pgcluster.DefaultDBName)
	}
	r := &replica{id: id, url: "http://" + listen, dbProxies: dbProxies, etcdProxies: etcdProxies, args: []string{"server",
		"--database-url", dbURL, "--etcd-endpoints", strings.Join(endpoints, ","), "--listen", listen,
		"--replica-id", id, "--agent-token", agentToken, "--operator-token", operatorToken, "--log-format", "json",
		"--election-ttl", t.ElectionTTL.String(), "--tick-interval", t.Tick.String(),
		"--heartbeat-interval", t.HeartbeatInterval.String(), "--agent-lost-threshold", t.AgentLost.String(),
		"--sweep-interval", t.Sweep.String(), "--orphan-threshold", "10s", "--dispatch-lost-threshold", "2m"}}
	c.replicas = append(c.replicas, r)
	return c.startReplica(r)
}

// waitServing waits until every replica answers /readyz and one leads.
func (c *cluster) waitServing(ctx context.Context) error {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		ready := 0
		for _, r := range c.replicas {
			if httpOK(r.url + "/readyz") {
				ready++
			}
		}
		if ready == len(c.replicas) && c.leader() != nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the replicas were not serving with a leader within 90s (logs in %s)", c.dir)
}

// leader is the replica whose /metrics says vigil_leader 1, if exactly one.
func (c *cluster) leader() *replica {
	var l *replica
	n := 0
	for _, r := range c.replicas {
		if leads, _, ok := scrapeLeader(r.url); ok && leads {
			l = r
			n++
		}
	}
	if n != 1 {
		return nil
	}
	return l
}

func (c *cluster) addAgent(slot int) error {
	a := &agentSlot{slot: slot, name: fmt.Sprintf("agent-%d", slot), tags: agentTags[slot%len(agentTags)]}
	if c.cfg.HooksBin != "" {
		a.skew = AgentSkews(c.cfg.Seed, c.cfg.Agents)[slot]
	}
	for _, r := range c.replicas {
		p, err := c.proxy(fmt.Sprintf("a%d-%s", slot, r.id), strings.TrimPrefix(r.url, "http://"))
		if err != nil {
			return err
		}
		a.links = append(a.links, p)
	}
	c.agents = append(c.agents, a)
	return c.startAgent(a, false)
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.etcd.io/etcd/server/v3/embed"
)

// etcdMembers is the size of the chaos cluster's etcd.
const etcdMembers = 3

// etcdCluster is the embedded etcd of the chaos cluster: three members in
// the harness's process, each with its own data directory and loopback
// URLs. Members reach each other only through a peer gate per member
// (peerGate): the URL each advertises to its peers is its gate's, which
// forwards to its real peer listener, so the harness can cut a member off
// from its peers without a network namespace. Clients reach a member
// through its front (a TCP proxy on the client URL it advertises), so
// that a kill can end their connections as a dying process's kernel
// would (stop).
type etcdCluster struct {
	dir     string
	logPath string
	tox     *toxiproxy.ApiServer // runs the fronts
	// beforeClose, when set (tests), runs in stop between the hard stop
	// and the listeners' close.
	beforeClose func(m *etcdMember)
	mu          sync.Mutex // guards members' e and isolated
	members     []*etcdMember
	// isolated names the members cut off from their peers.
	isolated map[string]bool
}

// etcdMember is one member: client is where clients (the replicas'
// proxies, the harness) reach it, its front's address, which forwards to
// serve, its real client listener; peer is its real peer listener, gate
// the peer URL it advertises.
type etcdMember struct {
	name   string
	client url.URL
	serve  url.URL
	front  *toxiproxy.Proxy
	peer   url.URL
	gate   *peerGate
	e      *embed.Etcd
	id     string // its member id as rafthttp's X-Server-From names it
}

// startEtcdCluster starts the three members and waits until they serve.
func startEtcdCluster(dir string) (*etcdCluster, error) {
	ec := &etcdCluster{dir: dir, logPath: filepath.Join(dir, "etcd.log"), isolated: map[string]bool{},
		tox: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())}
	for i := 1; i <= etcdMembers; i++ {
		m := &etcdMember{name: fmt.Sprintf("m%d", i)}
		for _, u := range []*url.URL{&m.client, &m.serve, &m.peer} {
			a, err := freeAddr()
			if err != nil {
				return ec, err
			}
			*u = url.URL{Scheme: "http", Host: a}
		}
		g, err := newPeerGate(ec, m)
		if err != nil {
			return ec, err
		}
		m.gate = g
		m.front = toxiproxy.NewProxy(ec.tox, "etcd-front-"+m.name, m.client.Host, m.serve.Host)
		if err := ec.tox.Collection.Add(m.front, true); err != nil {
			return ec, fmt.Errorf("front of etcd member %s: %w", m.name, err)
		}
		ec.members = append(ec.members, m)
	}
	return ec, ec.startAll()
}

// clientURLs lists every member's client URL.
func (ec *etcdCluster) clientURLs() []string {
	var out []string
	for _, m := range ec.members {
		out = append(out, m.client.String())
	}
	return out
}

// initialCluster is the --initial-cluster of every member: names and
// gate URLs.
func (ec *etcdCluster) initialCluster() string {
	var parts []string
	for _, m := range ec.members {
		parts = append(parts, m.name+"="+m.gate.url())
	}
	return strings.Join(parts, ",")
}

// config is m's embed configuration: its data directory (a restart keeps
// its data, leases included), its real client listener with its front's
// URL advertised, its real peer listener and its gate as the peer URL it
// advertises.
func (ec *etcdCluster) config(m *etcdMember) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = filepath.Join(ec.dir, "etcd-"+m.name)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{m.serve}, []url.URL{m.client}
	gate, _ := url.Parse(m.gate.url())
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{m.peer}, []url.URL{*gate}
	cfg.InitialCluster = ec.initialCluster()
	cfg.InitialClusterToken = "chaos"
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{ec.logPath}
	return cfg
}

// startAll starts every member that is not running, together (a member
// of a new or wholly stopped cluster waits for a quorum to be ready), and
// waits until each serves.
func (ec *etcdCluster) startAll() error {
	var wg sync.WaitGroup
	errs := make([]error, len(ec.members))
	for i, m := range ec.members {
		if m.e != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = ec.start(m)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// start starts m and waits until it serves (at most 30 s).
func (ec *etcdCluster) start(m *etcdMember) error {
	cfg := ec.config(m)
	var e *embed.Etcd
	var err error
	for try := 0; try < 20; try++ { // the old listeners may take a moment to close
		if e, err = embed.StartEtcd(cfg); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("start etcd member %s: %w", m.name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return fmt.Errorf("etcd member %s not ready within 30s", m.name)
	}
	ec.mu.Lock()
	m.e, m.id = e, e.Server.MemberID().String()
	ec.mu.Unlock()
	if err := m.front.Start(); err != nil && !errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
		return fmt.Errorf("front of etcd member %s: %w", m.name, err)
	}
	return nil
}

// stop stops m as a kill -9 would: its front closes every client
// connection and refuses new ones, as a dead process's kernel does; then
// HardStop, without handing its leadership over, and its listeners.
//
// The front comes first because embed's Close is not a kill: it stops the
// gRPC server gracefully, waiting up to the request timeout (7 s with the
// default election timeout) for open streams, and a watch on a member
// that HardStop has stopped gets no event in that time. A replica whose
// campaign watched its leader's key through that member learnt of the
// key's deletion only when the wait ended: three failovers in the
// 1,000-fault runs of 2026-11-27 were 5.7 to 9.8 s long for that reason
// (docs/reliability.md).
func (ec *etcdCluster) stop(m *etcdMember) {
	ec.mu.Lock()
	e := m.e
	m.e = nil
	ec.mu.Unlock()
	if e != nil {
		m.front.Stop()
		e.Server.HardStop()
		if ec.beforeClose != nil {
			ec.beforeClose(m)
		}
		e.Close()
	}
}

// stopAll stops every member and closes the gates when final.
func (ec *etcdCluster) stopAll(final bool) {
	var wg sync.WaitGroup
	for _, m := range ec.members {
		wg.Add(1)
		go func() { defer wg.Done(); ec.stop(m) }()
	}
	wg.Wait()
	if final {
		for _, m := range ec.members {
			m.gate.close()
		}
	}
}

// Roles of an etcd member at a fault's injection (FaultRecord.Detail).
const (
	etcdRaftLeader = "raft leader"
	etcdFollower   = "follower"
)

// role is etcdRaftLeader when m leads etcd's raft, else etcdFollower.
func (ec *etcdCluster) role(m *etcdMember) string {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if m.e != nil && m.e.Server.Leader() == m.e.Server.MemberID() {
		return etcdRaftLeader
	}
	return etcdFollower
}

// member is the member a fault's seeded pick targets.
func (ec *etcdCluster) member(pick int) *etcdMember { return ec.members[pick%len(ec.members)] }

// isolate cuts m off from its peers (on true) or reconnects it: its gate
// refuses every request, the other gates refuse the requests m sends, and
// the connections already open either way are closed.
func (ec *etcdCluster) isolate(m *etcdMember, on bool) {
	ec.mu.Lock()
	ec.isolated[m.name] = on
	id := m.id
	ec.mu.Unlock()
	if !on {
		return
	}
	for _, o := range ec.members {
		if o == m {
			o.gate.drop(func(string) bool { return true })
		} else {
			o.gate.drop(func(from string) bool { return from == id })
		}
	}
}

// refuses reports whether the gate of member to refuses a request that
// names sender id from (empty: a request that names none).
func (ec *etcdCluster) refuses(to *etcdMember, from string) bool {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	if ec.isolated[to.name] {
		return true
	}
	for _, m := range ec.members {
		if m.id == from && from != "" && ec.isolated[m.name] {
			return true
		}
	}
	return false
}

// peerGate is a loopback HTTP proxy in front of one member's peer
// listener. Every raft message between members (the streams, pipelined
// messages, snapshots) is an HTTP request that names its sender in the
// X-Server-From header (etcd's rafthttp), so one gate per member controls
// every peer link into it: the link from a to b is cut in b's gate by
// refusing, and closing, the requests from a. Requests that name no
// sender (version probes, a follower forwarding a lease renewal to the
// leader) pass unless the gate's own member is isolated; an isolated
// member loses its raft leader within an election timeout and then has
// no leader to forward a renewal to.
type peerGate struct {
	ec     *etcdCluster
	m      *etcdMember
	ln     net.Listener
	srv    *http.Server
	proxy  *httputil.ReverseProxy
	mu     sync.Mutex
	active map[*gateReq]struct{}
}

// quiet discards the gates' HTTP error logs.
var quiet = log.New(io.Discard, "", 0)

// gateReq is one request in flight through a gate.
type gateReq struct {
	from   string
	cancel context.CancelFunc
}

func newPeerGate(ec *etcdCluster, m *etcdMember) (*peerGate, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	target := m.peer
	g := &peerGate{ec: ec, m: m, ln: ln, active: map[*gateReq]struct{}{}}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(&target) },
		FlushInterval: -1, // raft streams are long-lived responses
		Transport:     &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16},
		ErrorLog:      quiet, // a cut stream's copy error is the fault working
		ErrorHandler:  func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	g.srv = &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second, ErrorLog: quiet}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

func (g *peerGate) url() string { return "http://" + g.ln.Addr().String() }

// ServeHTTP forwards r to the member unless the gate refuses it; a
// refused request's connection is closed without a reply, as a cut
// network would.
func (g *peerGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	from := r.Header.Get("X-Server-From")
	if g.ec.refuses(g.m, from) {
		abort(w)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	req := &gateReq{from: from, cancel: cancel}
	g.mu.Lock()
	g.active[req] = struct{}{}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.active, req)
		g.mu.Unlock()
		cancel()
	}()
	g.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// abort closes the request's connection without a reply.
func abort(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// drop ends every request in flight whose sender match accepts.
func (g *peerGate) drop(match func(from string) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for req := range g.active {
		if match(req.from) {
			req.cancel()
		}
	}
}

func (g *peerGate) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = g.srv.Shutdown(ctx)
	_ = g.srv.Close()
}

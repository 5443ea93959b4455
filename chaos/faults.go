package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
)

// inject runs the plan lane by lane (runLanes): each fault at its offset
// from begin or, when its lane is still busy, once the lane is free;
// applied, held, reverted and recorded with its real span and how far
// behind plan it started. It returns once every fault has been reverted.
func (c *cluster) inject(ctx context.Context, plan []Fault, begin time.Time, logf func(string, ...any)) {
	runLanes(ctx, plan, begin, c.cfg.Timing, wallClock{}, c.apply, func(run laneRun) {
		f, rec := run.Fault, run.Rec
		if run.Err != nil && rec.Start.IsZero() {
			logf("fault %d %s: %v", f.Seq, f.Kind, run.Err)
			return
		}
		if run.Err != nil {
			// Injected, then its revert failed (a restart that did not come
			// up): the history must still hold the fault, or the checker
			// would judge its effects as if nothing had happened.
			logf("fault %d %s: injected, then: %v", f.Seq, f.Kind, run.Err)
			if rec.End.IsZero() {
				rec.End = run.Done
			}
		}
		c.rec.fault(rec)
		logf("fault %3d %-27s %-8s %s..%s lag %s %s", f.Seq, rec.Kind, rec.Target, rec.Start.Format("15:04:05.000"),
			rec.End.Format("15:04:05.000"), rec.Lag.Round(time.Millisecond), rec.Detail)
	})
}

// apply injects f, waits its hold, reverts it and returns its record.
func (c *cluster) apply(ctx context.Context, f Fault) (FaultRecord, error) {
	rec := FaultRecord{Kind: f.Kind}
	switch {
	case f.Kind.agentKind():
		return c.applyAgent(ctx, f, rec)
	case (f.Kind == PostgresFast || f.Kind == PostgresImmediate) && c.pat != nil:
		return c.failover(ctx, rec)
	case f.Kind == PostgresFast || f.Kind == PostgresImmediate:
		rec.Target, rec.Start = "postgres", time.Now()
		err := c.restartPostgres(ctx, f.Kind == PostgresImmediate, f.Hold)
		rec.End = time.Now()
		return rec, err
	case f.Kind == EtcdMemberKill || f.Kind == EtcdMemberPartition:
		return c.applyEtcdMember(f, rec)
	case f.Kind == EtcdRestart:
		c.mu.Lock()
		defer c.mu.Unlock()
		rec.Target, rec.Start = "etcd", time.Now()
		c.etcd.stopAll(false)
		time.Sleep(f.Hold)
		err := c.etcd.startAll()
		rec.End = time.Now()
		return rec, err
	case f.Kind == DatabaseSlow:
		rec.Target, rec.Detail = "postgres", f.Delay.String()
		var links []*toxiproxy.Proxy
		for _, r := range c.replicas {
			links = append(links, r.dbProxies...)
		}
		rec.Start = time.Now()
		err := hold(links, latencyToxics("lat", f.Delay), f.Hold)
		rec.End = time.Now()
		return rec, err
	}
	return c.applyReplica(ctx, f, rec)
}

func (c *cluster) applyAgent(ctx context.Context, f Fault, rec FaultRecord) (FaultRecord, error) {
	a := c.agents[f.Agent%len(c.agents)]
	var err error
	switch f.Kind {
	case AgentKill:
		p := c.seize(&a.procSlot)
		rec.Target, rec.Start = p.name, time.Now()
		p.kill(EndKilled)
		time.Sleep(f.Hold)
		rec.End = time.Now()
		if f.Rename {
			rec.Detail = "restarted under a new name"
		}
		err = c.startAgent(a, f.Rename)
	case AgentStopShort, AgentStopLong:
		p := c.current(&a.procSlot)
		rec.Target, rec.Start = p.name, time.Now()
		p.signal(syscall.SIGSTOP)
		time.Sleep(f.Hold)
		p.signal(syscall.SIGCONT)
		rec.End = time.Now()
	case AgentPartitionShort, AgentPartitionLong:
		rec.Target, rec.Detail = c.current(&a.procSlot).name, f.Mode
		rec.Start = time.Now()
		err = sever(a.links, f.Mode, f.Hold)
		rec.End = time.Now()
	case AgentLatency:
		rec.Target, rec.Detail = c.current(&a.procSlot).name, f.Delay.String()
		rec.Start = time.Now()
		err = hold(a.links, latencyToxics("lat", f.Delay), f.Hold)
		rec.End = time.Now()
	}
	return rec, err
}

func (c *cluster) applyReplica(ctx context.Context, f Fault, rec FaultRecord) (FaultRecord, error) {
	wait := 5 * time.Second
	if f.Kind.leaderKind() {
		wait = leaderWait // a leader fault waits for the next leader rather than being dropped
	}
	lead := c.awaitLeader(ctx, wait)
	target := c.replicas[f.Pick%len(c.replicas)]
	switch f.Kind {
	case LeaderKill, LeaderStop, LeaderStopMidTx, LeaderEtcdCut:
		if lead == nil {
			return rec, fmt.Errorf("no leader to target within %s", wait)
		}
		target = lead
	case AttachedReplicaStop, FollowerRestart:
		if target == lead {
			target = c.replicas[(f.Pick+1)%len(c.replicas)]
		}
	}
	rec.Target = target.id
	var err error
	switch f.Kind {
	case LeaderKill:
		p := c.seize(&target.procSlot)
		rec.Start = time.Now()
		p.kill(EndKilled)
		time.Sleep(f.Hold)
		rec.End = time.Now()
		err = c.startReplica(target)
	case LeaderStop, AttachedReplicaStop:
		p := c.current(&target.procSlot)
		rec.Start = time.Now()
		p.signal(syscall.SIGSTOP)
		time.Sleep(f.Hold)
		p.signal(syscall.SIGCONT)
		rec.End = time.Now()
	case LeaderStopMidTx:
		err = c.stopMidTx(ctx, target, f.Hold, &rec)
	case FollowerRestart:
		p := c.seize(&target.procSlot)
		rec.Start = time.Now()
		p.stop(10 * time.Second)
		time.Sleep(f.Hold)
		rec.End = time.Now()
		err = c.startReplica(target)
	case ReplicaDBCut:
		rec.Detail = f.Mode
		rec.Start = time.Now()
		err = sever(target.dbProxies, f.Mode, f.Hold)
		rec.End = time.Now()
	case LeaderEtcdCut:
		rec.Detail = f.Mode
		rec.Start = time.Now()
		err = sever(target.etcdProxies, f.Mode, f.Hold)
		rec.End = time.Now()
	}
	return rec, err
}

// applyEtcdMember kills (hard stop, then a start after the hold) or
// isolates one etcd member, the seeded pick. Detail says whether it was
// etcd's raft leader at the injection: losing the raft leader makes etcd
// elect another, whose lessor extends every lease (invariant 6).
func (c *cluster) applyEtcdMember(f Fault, rec FaultRecord) (FaultRecord, error) {
	m := c.etcd.member(f.Pick)
	rec.Target, rec.Detail = "etcd-"+m.name, c.etcd.role(m)
	rec.Start = time.Now()
	var err error
	if f.Kind == EtcdMemberKill {
		c.etcd.stop(m)
		time.Sleep(f.Hold)
		rec.End = time.Now()
		err = c.etcd.start(m)
	} else {
		c.etcd.isolate(m, true)
		time.Sleep(f.Hold)
		c.etcd.isolate(m, false)
		rec.End = time.Now()
	}
	return rec, err
}

// stopMidTx slows the leader's database link so that its transactions
// stay open for a while, counts its leader sessions inside a transaction
// (pg_stat_activity, application_name vigil-leader), SIGSTOPs it, lifts the
// latency and SIGCONTs it after hold.
func (c *cluster) stopMidTx(ctx context.Context, r *replica, d time.Duration, rec *FaultRecord) error {
	links := r.dbProxies
	if err := addToxics(links, latencyToxics("midtx", 150*time.Millisecond)); err != nil {
		return err
	}
	time.Sleep(700 * time.Millisecond)
	open := c.leaderSessionsInTx(ctx)
	p := c.current(&r.procSlot)
	rec.Start = time.Now()
	p.signal(syscall.SIGSTOP)
	removeToxics(links, latencyToxics("midtx", 0))
	rec.Detail = fmt.Sprintf("%d leader sessions in a transaction at the stop", open)
	time.Sleep(d)
	p.signal(syscall.SIGCONT)
	rec.End = time.Now()
	return nil
}

func (c *cluster) leaderSessionsInTx(ctx context.Context) int {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := pgx.Connect(qctx, c.directURL())
	if err != nil {
		return -1
	}
	defer conn.Close(context.Background())
	var n int
	if conn.QueryRow(qctx, `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = 'vigil-leader' AND xact_start IS NOT NULL`).Scan(&n) != nil {
		return -1
	}
	return n
}

// directURL is the database URL without a proxy (the harness's own reads).
func (c *cluster) directURL() string {
	if c.pat != nil {
		return c.pat.url(c.pat.hosts(), "vigil", "vigil")
	}
	return fmt.Sprintf("postgres://vigil@127.0.0.1:%d/vigil?sslmode=disable", c.pgCfg.Port)
}

// leaderWait bounds how long a leader fault waits for a leader (one may
// be in the middle of a failover, or PostgreSQL restarting). It is long
// because the etcd lane runs its faults independently: a lane that is
// behind plan restarts etcd with only its settle time (ElectionTTL + 1 s)
// between two restarts, and no replica can be elected in such a gap, so
// a leader can be missing for several etcd faults in a row (a short run
// once waited 30 s through three of them and dropped its leader_kill).
// The wait delays the control lane; it never drops a fault a healthy
// cluster would have had a target for.
const leaderWait = 2 * time.Minute

// awaitLeader waits up to d for exactly one replica to lead.
func (c *cluster) awaitLeader(ctx context.Context, d time.Duration) *replica {
	deadline := time.Now().Add(d)
	for {
		if l := c.leader(); l != nil || time.Now().After(deadline) || ctx.Err() != nil {
			return l
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// blackholeToxics drop everything in both directions and keep the
// connections open (toxiproxy's timeout toxic with timeout 0).
var blackholeToxics = []string{
	`{"name":"bh_up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`,
	`{"name":"bh_down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`,
}

// latencyToxics delay every chunk by d in both directions; name tells
// them apart from another fault's on the same proxy.
func latencyToxics(name string, d time.Duration) []string {
	ms := d.Milliseconds()
	return []string{
		fmt.Sprintf(`{"name":"%s_up","type":"latency","stream":"upstream","attributes":{"latency":%d}}`, name, ms),
		fmt.Sprintf(`{"name":"%s_down","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, name, ms),
	}
}

func addToxics(links []*toxiproxy.Proxy, toxics []string) error {
	for _, p := range links {
		for _, t := range toxics {
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(t)); err != nil {
				return fmt.Errorf("proxy %s: add toxic: %w", p.Name, err)
			}
		}
	}
	return nil
}

// removeToxics removes toxics (by their names) from links.
func removeToxics(links []*toxiproxy.Proxy, toxics []string) {
	for _, p := range links {
		for _, t := range toxics {
			var named struct{ Name string }
			if json.Unmarshal([]byte(t), &named) == nil {
				_ = p.Toxics.RemoveToxic(context.Background(), named.Name)
			}
		}
	}
}

// hold adds toxics to links for d, then removes them.
func hold(links []*toxiproxy.Proxy, toxics []string, d time.Duration) error {
	err := addToxics(links, toxics)
	time.Sleep(d)
	removeToxics(links, toxics)
	return err
}

// sever cuts links (mode "cut") or black-holes them (any other mode) for d.
func sever(links []*toxiproxy.Proxy, mode string, d time.Duration) error {
	if mode == "cut" {
		return cut(links, d)
	}
	return hold(links, blackholeToxics, d)
}

// cut stops links (connections refused, open ones closed) for d.
func cut(links []*toxiproxy.Proxy, d time.Duration) error {
	for _, p := range links {
		p.Stop()
	}
	time.Sleep(d)
	var err error
	for _, p := range links {
		for try := 0; try < 50; try++ {
			if err = p.Start(); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return err
}

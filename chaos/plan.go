package chaos

import (
	"math/rand/v2"
	"time"
)

// FaultKind names one kind of injected fault (docs/reliability.md, "Faults").
type FaultKind string

// The fault kinds. Agent faults target one agent instance; the others
// target the control plane.
const (
	AgentKill           FaultKind = "agent_kill"            // kill -9, restarted after the hold (sometimes renamed)
	AgentStopShort      FaultKind = "agent_stop_short"      // SIGSTOP shorter than the agent-lost threshold
	AgentStopLong       FaultKind = "agent_stop_long"       // SIGSTOP longer than the threshold
	AgentPartitionShort FaultKind = "agent_partition_short" // every link of the agent cut or black-holed, shorter
	AgentPartitionLong  FaultKind = "agent_partition_long"  // same, longer than the threshold
	AgentLatency        FaultKind = "agent_latency"         // added latency on every link of the agent
	LeaderKill          FaultKind = "leader_kill"           // kill -9 of the leader, restarted after the hold
	LeaderStop          FaultKind = "leader_stop"           // SIGSTOP of the leader past the election TTL
	LeaderStopMidTx     FaultKind = "leader_stop_mid_tx"    // same, while its database link is slow so a transaction is open
	AttachedReplicaStop FaultKind = "attached_replica_stop" // SIGSTOP of a follower that agents talk to first
	FollowerRestart     FaultKind = "follower_restart"      // SIGTERM and start of a follower
	PostgresFast        FaultKind = "postgres_restart_fast" // pg_ctl stop -m fast, start
	PostgresImmediate   FaultKind = "postgres_restart_immediate"
	EtcdRestart         FaultKind = "etcd_restart"          // every etcd member stopped and started again
	ReplicaDBCut        FaultKind = "replica_db_cut"        // one replica's database link cut or black-holed
	DatabaseSlow        FaultKind = "database_slow"         // every replica's database link delayed
	EtcdMemberKill      FaultKind = "etcd_member_kill"      // one etcd member hard-stopped, started again after the hold
	EtcdMemberPartition FaultKind = "etcd_member_partition" // one etcd member cut off from its peers
	LeaderEtcdCut       FaultKind = "leader_etcd_cut"       // the leader's links to etcd cut or black-holed, not its database link
	// PostgresFailover replaces both PostgreSQL restarts under Patroni
	// (Config.Patroni): the primary's postmaster killed -9, Patroni
	// promoting the synchronous standby. Not drawn by Plan.
	PostgresFailover FaultKind = "postgres_failover"
)

// AllKinds lists every fault kind, in report order.
var AllKinds = []FaultKind{AgentKill, AgentStopShort, AgentStopLong, AgentPartitionShort, AgentPartitionLong,
	AgentLatency, LeaderKill, LeaderStop, LeaderStopMidTx, AttachedReplicaStop, FollowerRestart,
	PostgresFast, PostgresImmediate, EtcdRestart, ReplicaDBCut, DatabaseSlow,
	EtcdMemberKill, EtcdMemberPartition, LeaderEtcdCut}

// leaderKind reports whether k targets the leading replica: the
// cluster loses its leader, and another must take over (invariant 6).
func (k FaultKind) leaderKind() bool {
	return k == LeaderKill || k == LeaderStop || k == LeaderStopMidTx || k == LeaderEtcdCut
}

// agentKind reports whether k targets one agent.
func (k FaultKind) agentKind() bool {
	switch k {
	case AgentKill, AgentStopShort, AgentStopLong, AgentPartitionShort, AgentPartitionLong, AgentLatency:
		return true
	}
	return false
}

// weight is k's relative frequency: agent faults are cheap and run on
// parallel lanes, control-plane faults take the one control lane.
func (k FaultKind) weight() int {
	switch k {
	case AgentKill, AgentStopShort, AgentStopLong, AgentPartitionShort, AgentPartitionLong:
		return 6
	case AgentLatency, DatabaseSlow:
		return 4
	}
	return 3
}

// Fault is one planned fault: what, on which lane target, when (offset
// from the start of the fault phase) and for how long.
type Fault struct {
	Seq    int
	Kind   FaultKind
	Agent  int           // agent slot for agent faults
	At     time.Duration // offset of the injection
	Hold   time.Duration // how long the fault lasts before it is reverted
	Rename bool          // AgentKill: the restart takes a new name
	Mode   string        // partitions and cuts: "cut" (refused) or "blackhole" (silent)
	Delay  time.Duration // latency faults: added delay per direction
	Pick   int           // a seeded choice among replicas, resolved at run time
}

// Plan draws n faults from seed for a cluster of agents agent slots. Faults
// on the same lane never overlap: each agent slot is a lane, the control
// plane is one lane, and DatabaseSlow has its own; different lanes do, as
// they would in production. At most maxImpaired agents are impaired at
// once, so the mass-silence brake stays out of the way of the threshold
// checks. Gaps between injections are exponential with mean gap. The same
// arguments always give the same plan.
func Plan(seed int64, n, agents int, gap time.Duration, t Timing) []Fault {
	r := rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
	total := 0
	for _, k := range AllKinds {
		total += k.weight()
	}
	laneFree := map[int]time.Duration{} // lane -> offset when it frees
	var agentBusy []span
	var out []Fault
	at := time.Duration(0)
	for len(out) < n {
		at += time.Duration(r.ExpFloat64() * float64(gap))
		k := pickKind(r, total)
		f := Fault{Seq: len(out) + 1, Kind: k, Pick: r.IntN(1 << 20)}
		f.Hold = holdFor(r, k, t)
		if k.agentKind() {
			f.Agent = r.IntN(agents)
		}
		lane := f.lane()
		start := max(at, laneFree[lane])
		if k.agentKind() && k != AgentLatency {
			for overlapping(agentBusy, start, start+f.Hold+t.ReconnectBound()) >= maxImpaired {
				start += 500 * time.Millisecond
			}
			agentBusy = append(agentBusy, span{start, start + f.Hold + t.ReconnectBound()})
		}
		f.At = start
		laneFree[lane] = start + f.Hold + settle(k, t)
		switch k {
		case AgentKill:
			f.Rename = r.IntN(3) == 0
		case AgentPartitionShort, AgentPartitionLong, ReplicaDBCut, LeaderEtcdCut:
			f.Mode = []string{"cut", "blackhole"}[r.IntN(2)]
		case AgentLatency:
			f.Delay = time.Duration(50+r.IntN(450)) * time.Millisecond
		case DatabaseSlow:
			f.Delay = time.Duration(20+r.IntN(280)) * time.Millisecond
		}
		out = append(out, f)
	}
	return out
}

// The lanes that are not an agent slot's (agent slots are lanes 0, 1, ...).
const (
	laneControl = -1 // the replicas, PostgreSQL, one replica's database or etcd links
	laneSlow    = -2 // DatabaseSlow
	laneEtcd    = -3 // the etcd members: one member fault at a time keeps a quorum
)

// lane is f's lane: its agent slot for an agent fault, else laneSlow or
// laneControl. Faults of one lane never overlap, on paper (Plan) or at run
// time (runLanes); faults of different lanes may.
func (f Fault) lane() int {
	switch {
	case f.Kind.agentKind():
		return f.Agent
	case f.Kind == DatabaseSlow:
		return laneSlow
	case f.Kind.etcdKind():
		return laneEtcd
	}
	return laneControl
}

// etcdKind reports whether k targets the etcd members.
func (k FaultKind) etcdKind() bool {
	return k == EtcdRestart || k == EtcdMemberKill || k == EtcdMemberPartition
}

// maxImpaired bounds the agents impaired at once (see Plan).
const maxImpaired = 2

type span struct{ from, to time.Duration }

func overlapping(spans []span, from, to time.Duration) int {
	n := 0
	for _, s := range spans {
		if s.from < to && from < s.to {
			n++
		}
	}
	return n
}

func pickKind(r *rand.Rand, total int) FaultKind {
	x := r.IntN(total)
	for _, k := range AllKinds {
		if x < k.weight() {
			return k
		}
		x -= k.weight()
	}
	return AllKinds[len(AllKinds)-1]
}

// between draws uniformly from [lo, hi).
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

// holdFor draws how long a fault of kind k lasts: "short" and "long" are
// relative to the agent-lost threshold, leader stops outlast the TTL.
func holdFor(r *rand.Rand, k FaultKind, t Timing) time.Duration {
	th, ttl := t.AgentLost, t.ElectionTTL
	switch k {
	case AgentKill:
		return between(r, time.Second, th+3*time.Second)
	case AgentStopShort, AgentPartitionShort:
		return between(r, 500*time.Millisecond, th-t.ReconnectBound()-time.Second)
	case AgentStopLong, AgentPartitionLong:
		return between(r, th+time.Second, th+5*time.Second)
	case AgentLatency, DatabaseSlow:
		return between(r, 2*time.Second, 8*time.Second)
	case LeaderKill:
		return between(r, 500*time.Millisecond, 2*time.Second)
	case LeaderStop, LeaderStopMidTx, AttachedReplicaStop, LeaderEtcdCut:
		return between(r, ttl+500*time.Millisecond, ttl+3*time.Second)
	case EtcdMemberKill:
		return between(r, 500*time.Millisecond, 3*time.Second)
	case EtcdMemberPartition:
		return between(r, time.Second, 5*time.Second)
	case FollowerRestart, PostgresFast, PostgresImmediate, EtcdRestart:
		return between(r, 200*time.Millisecond, 2*time.Second)
	case ReplicaDBCut:
		return between(r, time.Second, ttl+3*time.Second)
	}
	return time.Second
}

// settle is the quiet time a lane keeps after a fault of kind k is
// reverted, so that the cluster recovers before the lane's next fault: a
// restarted process must come back, a new leader must be elected.
func settle(k FaultKind, t Timing) time.Duration {
	switch k {
	case LeaderKill, LeaderStop, LeaderStopMidTx, EtcdRestart, PostgresFast, PostgresImmediate,
		LeaderEtcdCut, EtcdMemberKill, EtcdMemberPartition:
		return t.ElectionTTL + time.Second
	case AgentKill:
		return 2 * time.Second
	}
	return 500 * time.Millisecond
}

// Skewed agent slots: their wall clock is minutes off, one ahead and one
// behind, for the whole run (docs/reliability.md, "The cluster").
const (
	skewAheadSlot  = 1
	skewBehindSlot = 3
)

// AgentSkews draws from seed the wall-clock offset of each of agents
// slots: 1 to 10 minutes ahead for slot skewAheadSlot, 1 to 10 minutes
// behind for skewBehindSlot, none for the others. The same seed gives
// the same skews.
func AgentSkews(seed int64, agents int) []time.Duration {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5ca1ab1e))
	out := make([]time.Duration, agents)
	out[skewAheadSlot] = between(r, time.Minute, 10*time.Minute).Round(time.Second)
	out[skewBehindSlot] = -between(r, time.Minute, 10*time.Minute).Round(time.Second)
	return out
}

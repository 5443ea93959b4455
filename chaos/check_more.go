package chaos

import (
	"fmt"
	"slices"
	"time"
)

// Failover is one loss of the leader and its replacement.
type Failover struct {
	Fault     FaultKind
	Lost      time.Time     // when the leader was killed or stopped
	Old, New  string        // replica ids in etcd's view
	Elected   time.Duration // until etcd named another leader (0: none seen)
	Fenced    time.Duration // until the fence moved to a newer term (0: none seen)
	EtcdDown  bool          // etcd was restarted meanwhile: not judged
	Violation bool
}

// ReapedAlive is an attempt failed by a reaper whose process was still
// running at the reap (its agent was stopped or cut off).
type ReapedAlive struct {
	AttemptID string
	Instance  string
	Reaped    time.Time
	Gone      time.Time // when the process ended (zero: still alive at the end)
	Deadline  time.Time // by when its agent had to stop it
}

// checkFencing: every event a leader wrote (epoch set) and every other
// transaction a leader session wrote in committed before the fence moved
// past its epoch, and its epoch is one the fence held (a leader session's
// write without a fence check is a violation);
// the fence only moves forward; and after each loss of the leader the
// fence moved to another replica within Timing.FenceBound, unless the
// database or etcd was down or slowed meanwhile (a fence cannot move
// without either). fos are the failovers checkLiveness found.
func checkFencing(h *History, fos []Failover) Result {
	r := Result{Invariant: InvFencing}
	fenceBound := h.Timing.FenceBound()
	excused := 0
	for _, fo := range fos {
		if fo.EtcdDown || h.databaseFaultWithin(fo.Lost.Add(-fenceBound), fo.Lost.Add(fenceBound)) {
			excused++
			continue
		}
		r.Checked++
		if fo.Fenced == 0 || fo.Fenced > fenceBound {
			took := "never moved"
			if fo.Fenced > 0 {
				took = "moved after " + fo.Fenced.Round(time.Millisecond).String()
			}
			r.Violations = append(r.Violations, Violation{InvFencing, fo.Lost, "leader " + fo.Old,
				fmt.Sprintf("%s: the fence %s (bound %s)", fo.Fault, took, fenceBound)})
		}
	}
	if excused > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d failovers beside a database or etcd fault: the fence's move not timed", excused))
	}
	known := map[int64]bool{}
	for _, f := range h.Fence {
		known[f.Epoch] = true
	}
	for _, ev := range h.Events {
		if ev.Epoch == 0 {
			continue
		}
		r.Checked++
		r.Violations = append(r.Violations, fencedWrite(h, known, ev.Epoch, ev.Committed, fmt.Sprintf("event %d", ev.ID), ev.Kind)...)
	}
	for _, w := range h.LeaderWrites {
		r.Checked++
		subject := fmt.Sprintf("transaction %d", w.TxID)
		if w.Epoch == 0 {
			r.Violations = append(r.Violations, Violation{InvFencing, w.Committed, subject,
				fmt.Sprintf("a leader session wrote %s without a fence check", w.Table)})
			continue
		}
		r.Violations = append(r.Violations, fencedWrite(h, known, w.Epoch, w.Committed, subject, "a write to "+w.Table)...)
	}
	for i := 1; i < len(h.Fence); i++ {
		if h.Fence[i].Epoch <= h.Fence[i-1].Epoch {
			r.Violations = append(r.Violations, Violation{InvFencing, h.Fence[i].Committed, fmt.Sprintf("epoch %d", h.Fence[i].Epoch),
				fmt.Sprintf("the fence moved back from %d", h.Fence[i-1].Epoch)})
		}
	}
	return r
}

// checkLogs: for every attempt that ran to its end record on an agent
// that was never killed, the lines stored plus the dropped count equal
// the lines it printed, and no outage left two gap markers (two markers
// with the same agent timestamp), and an outage longer than the
// reconnect bound inside the attempt's life left one (a marker carries
// the agent's clock: a skewed agent's is read back by its offset).
func checkLogs(h *History) Result {
	ix := newIndex(h)
	r := Result{Invariant: InvLogs}
	for i := range h.Executions {
		ex := &h.Executions[i]
		if !ex.HasEnd() {
			continue
		}
		if diedWithIt(h, ix, ex) {
			r.Excluded++ // killed before it could ship: its buffered lines die with it, by design
			continue
		}
		r.Checked++
		lg := h.Logs[ex.AttemptID]
		if lg.Received+lg.Dropped != ex.Printed {
			r.Violations = append(r.Violations, Violation{InvLogs, ex.End, "attempt " + ex.AttemptID,
				fmt.Sprintf("printed %d lines; stored %d + dropped %d; other lines stored: %q", ex.Printed, lg.Received, lg.Dropped, lg.Odd)})
		}
		seen := map[time.Time]bool{}
		for _, m := range lg.Markers {
			if seen[m] {
				r.Violations = append(r.Violations, Violation{InvLogs, m, "attempt " + ex.AttemptID,
					"two gap markers for the outage that began " + m.Format(time.RFC3339Nano)})
			}
			seen[m] = true
		}
		for _, f := range h.Faults {
			if f.Target != ex.Instance || (f.Kind != AgentPartitionLong && f.Kind != AgentPartitionShort) {
				continue
			}
			if f.End.Sub(f.Start) < h.Timing.ReconnectBound() || f.Start.Before(ex.Start) || f.End.After(ex.End) {
				continue
			}
			found := false
			for _, m := range lg.Markers {
				if m = h.agentTime(ex.Instance, m); !m.Before(f.Start) && !m.After(f.End) {
					found = true
				}
			}
			if !found {
				r.Violations = append(r.Violations, Violation{InvLogs, f.Start, "attempt " + ex.AttemptID,
					fmt.Sprintf("no gap marker for the %s partition %s..%s", f.Mode(), f.Start.Format(time.RFC3339Nano), f.End.Format(time.RFC3339Nano))})
			}
		}
	}
	if r.Excluded > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("out of scope: %d attempts whose agent never reached the control plane again before it was killed", r.Excluded))
	}
	return r
}

// fencedWrite judges one write of epoch that committed at committed: the
// fence held that epoch once, and had not moved past it by the commit.
func fencedWrite(h *History, known map[int64]bool, epoch int64, committed time.Time, subject, what string) []Violation {
	if !known[epoch] {
		return []Violation{{InvFencing, committed, subject, fmt.Sprintf("%s carries epoch %d, which the fence never held", what, epoch)}}
	}
	for _, f := range h.Fence {
		if f.Epoch > epoch && !committed.Before(f.Committed) {
			return []Violation{{InvFencing, committed, subject, fmt.Sprintf("%s at epoch %d committed %s after the fence moved to %d (%s)",
				what, epoch, committed.Sub(f.Committed), f.Epoch, f.Holder)}}
		}
	}
	return nil
}

// databaseFaultWithin reports whether a fault kept the database down,
// slow or cut from a replica at some time within [from, to].
func (h *History) databaseFaultWithin(from, to time.Time) bool {
	for _, f := range h.Faults {
		switch f.Kind {
		case PostgresFast, PostgresImmediate, PostgresFailover, DatabaseSlow, ReplicaDBCut:
			if f.Start.Before(to) && f.End.After(from) {
				return true
			}
		}
	}
	return false
}

// etcdElects reports whether fault f made etcd elect a raft leader: every
// member restarted, or the raft leader killed or cut off from its peers.
// A new raft leader's lessor extends every lease by an election timeout
// before any can expire (etcd's lessor Promote), and the election itself
// takes one, so a Vigil leader lost meanwhile keeps its etcd lease longer
// than TTL + 2 s. A follower's kill or isolation leaves the raft leader
// and its leases as they were, and is judged.
func (f FaultRecord) etcdElects() bool {
	switch f.Kind {
	case EtcdRestart:
		return true
	case EtcdMemberKill, EtcdMemberPartition:
		return f.Detail == etcdRaftLeader
	}
	return false
}

// Mode is the partition mode recorded in Detail ("cut" or "blackhole").
func (f FaultRecord) Mode() string { return f.Detail }

// checkLiveness: (a) no two replicas claimed leadership (vigil_leader 1)
// in samples spanning more than TTL + 2 s; (b) after each leader kill,
// stop or cut from etcd, etcd named another leader within TTL + 2 s,
// unless etcd itself had to elect a raft leader meanwhile (etcdElects).
func checkLiveness(h *History) (Result, []Failover) {
	r := Result{Invariant: InvLiveness}
	bound := h.Timing.ElectionTTL + 2*time.Second
	var dualSince time.Time
	for _, s := range h.Leaders {
		r.Checked++
		if len(s.Claiming) < 2 {
			dualSince = time.Time{}
			continue
		}
		if dualSince.IsZero() {
			dualSince = s.At
		}
		if s.At.Sub(dualSince) > bound {
			r.Violations = append(r.Violations, Violation{InvLiveness, s.At, fmt.Sprint(s.Claiming),
				fmt.Sprintf("%d replicas claim to lead since %s", len(s.Claiming), dualSince.Format(time.RFC3339Nano))})
			dualSince = s.At // report once per bound
		}
	}
	var fos []Failover
	for _, f := range h.Faults {
		if !f.Kind.leaderKind() {
			continue
		}
		fo := Failover{Fault: f.Kind, Lost: f.Start, Old: f.Target}
		for _, g := range h.Faults {
			if g.etcdElects() && g.Start.Before(f.Start.Add(bound)) && g.End.After(f.Start.Add(-bound)) {
				fo.EtcdDown = true
			}
		}
		for _, s := range h.Leaders {
			if s.At.After(f.Start) && s.EtcdOK && s.Etcd != "" && s.Etcd != f.Target {
				fo.New, fo.Elected = s.Etcd, s.At.Sub(f.Start)
				break
			}
		}
		for _, c := range h.Fence {
			if c.Committed.After(f.Start) && c.Holder != f.Target {
				fo.Fenced = c.Committed.Sub(f.Start)
				break
			}
		}
		if !fo.EtcdDown {
			r.Checked++
			if fo.New == "" || fo.Elected > bound {
				fo.Violation = true
				r.Violations = append(r.Violations, Violation{InvLiveness, f.Start, "leader " + f.Target,
					fmt.Sprintf("%s: no new leader within %s (elected after %s)", f.Kind, bound, fo.Elected)})
			}
		}
		fos = append(fos, fo)
	}
	return r, fos
}

// checkNoDuplicate: two executions of one TI never overlap in time. An
// overlap is allowed when one of the two was reaped: the earlier one, or
// the later one when the reaper gave up on it before the earlier one even
// started (its agent, stopped between the claim reply and the spawn,
// started it after the reaper had requeued it). Such an execution is
// listed as ReapedAlive; it is a violation only when that process
// outlived its agent's recovery: once the agent could reach the control
// plane again, or was killed, its process had to end within the
// reconnect bound plus the kill grace.
func checkNoDuplicate(h *History) (Result, []ReapedAlive) {
	ix := newIndex(h)
	r := Result{Invariant: InvNoDuplicate}
	var alive []ReapedAlive
	for _, list := range ix.byTI {
		for i := 1; i < len(list); i++ {
			r.Checked++
			prev, cur := list[i-1], list[i]
			if !prev.Finish(h.End).After(cur.Start) {
				continue
			}
			stale, ev, reaped := prev, Event{}, false
			if ev, reaped = ix.reaped[prev.AttemptID]; !reaped {
				if ev, reaped = ix.reaped[cur.AttemptID]; reaped && ev.Committed.Before(prev.Start) {
					stale = cur
				} else {
					reaped = false
				}
			}
			if !reaped {
				r.Violations = append(r.Violations, Violation{InvNoDuplicate, cur.Start, fmt.Sprintf("TI %d", cur.TIID),
					fmt.Sprintf("attempt %s (try %d on %s) started while attempt %s (try %d on %s) ran, which no reaper had failed",
						cur.AttemptID, cur.Try, cur.Instance, prev.AttemptID, prev.Try, prev.Instance)})
				continue
			}
			ra := reapedAlive(h, ix, stale, ev)
			alive = append(alive, ra)
			if !ra.Deadline.IsZero() && stale.Finish(h.End).After(ra.Deadline) {
				r.Violations = append(r.Violations, Violation{InvNoDuplicate, ra.Deadline, "attempt " + stale.AttemptID,
					fmt.Sprintf("reaped at %s, still running %s after its agent %s recovered or died",
						ev.Committed.Format(time.RFC3339Nano), stale.Finish(h.End).Sub(ra.Deadline).Round(time.Millisecond), stale.Instance)})
			}
		}
	}
	slices.SortFunc(alive, func(a, b ReapedAlive) int { return a.Reaped.Compare(b.Reaped) })
	return r, alive
}

// reapedAlive describes execution ex, which reaper event ev gave up on
// while its process lived (or was yet to start): by when its agent had to
// stop it, once the agent could reach the control plane again (the
// reconnect bound plus the kill grace after) or died (the kill grace and
// a second after).
func reapedAlive(h *History, ix index, ex *Execution, ev Event) ReapedAlive {
	ra := ReapedAlive{AttemptID: ex.AttemptID, Instance: ex.Instance, Reaped: ev.Committed, Gone: ex.Finish(time.Time{})}
	if back := h.ableAgain(ex.Instance, ev.Committed); !back.IsZero() {
		ra.Deadline = back.Add(h.Timing.ReconnectBound() + h.Timing.KillGrace)
	} else if a := ix.agentOf[ex.Instance]; !a.Ended.IsZero() {
		ra.Deadline = a.Ended.Add(h.Timing.KillGrace + time.Second)
	}
	return ra
}

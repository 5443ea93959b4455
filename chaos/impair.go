package chaos

import (
	"slices"
	"time"
)

// interval is a closed span of wall-clock time; a zero To is open-ended.
type interval struct{ From, To time.Time }

func (iv interval) overlaps(from, to time.Time) bool {
	return iv.From.Before(to) && (iv.To.IsZero() || from.Before(iv.To))
}

// impairments returns the spans during which agent instance inst was NOT
// able to heartbeat. docs/reliability.md defines "able": the process runs
// and is not stopped, at least one of its links to the control plane
// passes traffic, and the database accepts writes. In terms of the
// injected faults an instance is impaired
//
//   - from its kill (or exit) on, and before it started;
//
//   - while it is stopped or partitioned;
//
//   - while PostgreSQL is down, and for ReconnectBound after it is back;
//
//   - for the agent failover bound (2 heartbeat intervals: one timed-out
//     request and a register elsewhere, agent.RequestTimeout) after any
//     fault that takes down or freezes a replica or cuts it from the
//     database, whichever replica the agent was talking to.
//
//   - while the database is so slow that an agent request's statements
//     (requestRoundTrips round trips, each delayed both ways) outlast the
//     agent's request timeout (one heartbeat interval), and for
//     ReconnectBound after.
//
// Latency on an agent's own links impairs it only when one round trip
// (the delay both ways) outlasts the request timeout, which the plan's
// delays (≤ 500 ms) never do.
func (h *History) impairments(inst string) []interval {
	return h.impaired(inst, h.Timing.ReconnectBound(), false)
}

// impaired is impairments with pad in place of the reconnect bound after
// each fault; pad 0 gives the spans of the faults alone. With certain,
// only the faults that kept inst from heartbeating whichever replica it
// talked to count: a replica's fault impairs just the agents attached to
// it, which the history does not record, so the failover bound after it
// is a span in which inst may, not must, have been silent.
func (h *History) impaired(inst string, pad time.Duration, certain bool) []interval {
	var out []interval
	hb := h.Timing.HeartbeatInterval
	for _, a := range h.Agents {
		if a.Instance != inst {
			continue
		}
		out = append(out, interval{From: time.Time{}, To: a.Started})
		if !a.Ended.IsZero() {
			out = append(out, interval{From: a.Ended})
		}
	}
	for _, f := range h.Faults {
		switch f.Kind {
		case AgentKill:
			if f.Target == inst {
				out = append(out, interval{From: f.Start})
			}
		case AgentStopShort, AgentStopLong, AgentPartitionShort, AgentPartitionLong:
			if f.Target == inst {
				out = append(out, interval{f.Start, f.End.Add(pad)})
			}
		case PostgresFast, PostgresImmediate, PostgresFailover:
			out = append(out, interval{f.Start, f.End.Add(pad)})
		case DatabaseSlow:
			if h.slowBeyondTimeout(f) {
				out = append(out, interval{f.Start, f.End.Add(pad)})
			}
		case LeaderKill, LeaderStop, LeaderStopMidTx, AttachedReplicaStop, FollowerRestart, ReplicaDBCut:
			if certain {
				continue
			}
			end := f.Start.Add(2 * hb)
			if f.End.Before(end) {
				end = f.End
			}
			out = append(out, interval{f.Start, end.Add(pad)})
		}
	}
	slices.SortFunc(out, func(a, b interval) int { return a.From.Compare(b.From) })
	return out
}

// merged returns inst's impairments merged into disjoint spans, oldest
// first.
func (h *History) merged(inst string) []interval {
	return h.mergedPad(inst, h.Timing.ReconnectBound(), false)
}

func (h *History) mergedPad(inst string, pad time.Duration, certain bool) []interval {
	var out []interval
	for _, iv := range h.impaired(inst, pad, certain) {
		if n := len(out); n > 0 && (out[n-1].To.IsZero() || !iv.From.After(out[n-1].To)) {
			if !out[n-1].To.IsZero() && (iv.To.IsZero() || iv.To.After(out[n-1].To)) {
				out[n-1].To = iv.To
			}
			continue
		}
		out = append(out, iv)
	}
	return out
}

// ableAgain returns when inst became able again after the impairment in
// force at t (t itself when it was able; zero when it never did).
func (h *History) ableAgain(inst string, t time.Time) time.Time {
	for _, iv := range h.merged(inst) {
		if iv.overlaps(t, t.Add(time.Nanosecond)) {
			return iv.To
		}
	}
	return t
}

// lastClear is when the last fault was reverted.
func (h *History) lastClear() time.Time {
	var t time.Time
	for _, f := range h.Faults {
		if f.End.After(t) {
			t = f.End
		}
	}
	return t
}

// requestRoundTrips is how many database round trips the request that
// restores an agent's link costs on the server: a reconnect's register
// (BEGIN, the insert that finds the name taken, the locked read, the
// update, COMMIT and the heartbeat statement). An agent whose link drops
// while the database is that slow cannot register again until the
// slowdown ends, and any request may drop it: a completion costs as many
// round trips (credential check, BEGIN, the run and TI locks, the update
// with its event, COMMIT). Counting a heartbeat's two round trips alone
// (a link that held) judged such an agent able: the second 1,000-fault
// run's a1-1, whose completion timed out at 98 ms each way and whose
// three registers then did too (docs/reliability.md).
const requestRoundTrips = 6

// slowBeyondTimeout reports whether DatabaseSlow fault f delays an agent
// request past the agent's request timeout.
func (h *History) slowBeyondTimeout(f FaultRecord) bool {
	d, err := time.ParseDuration(f.Detail)
	return err == nil && 2*d*requestRoundTrips >= h.Timing.HeartbeatInterval
}

// nextImpairment returns the start of the first fault that certainly
// impaired inst (see impaired) and began within (from, to), if any: the
// end of an able window.
func (h *History) nextImpairment(inst string, from, to time.Time) (time.Time, bool) {
	for _, iv := range h.impaired(inst, 0, true) {
		if iv.From.After(from) && iv.From.Before(to) {
			return iv.From, true
		}
	}
	return time.Time{}, false
}

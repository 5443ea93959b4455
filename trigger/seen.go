package trigger

import "github.com/vigil-sched/vigil/state"

// Seen is the set of kinds of state among a TI's upstreams: the facts
// Decide depends on. Decide(r, c) is Table(r)[c.Seen()] for every Counts c
// (TestDecideDependsOnlyOnSeen), so a scheduler that can only aggregate,
// like the store's SQL, ORs each upstream's StateSeen together and looks
// the decision up instead of counting.
type Seen uint8

// The kinds of upstream state, one bit each.
const (
	SeenSuccess        Seen = 1 << iota // an upstream succeeded
	SeenSkipped                         // an upstream was skipped
	SeenFailed                          // an upstream failed or was cancelled
	SeenUpstreamFailed                  // an upstream is upstream_failed
	SeenPending                         // an upstream is not done yet

	// SeenCombinations is the number of Seen values: Table's length.
	SeenCombinations = int(SeenPending) << 1
)

// StateSeen is the kind of one upstream in state s.
func StateSeen(s state.TI) Seen {
	switch s {
	case state.TISuccess:
		return SeenSuccess
	case state.TISkipped:
		return SeenSkipped
	case state.TIFailed, state.TICancelled:
		return SeenFailed
	case state.TIUpstreamFailed:
		return SeenUpstreamFailed
	}
	return SeenPending
}

// Seen is the kinds of state among the upstreams c counts.
func (c Counts) Seen() Seen {
	var s Seen
	for _, k := range []struct {
		n   int
		bit Seen
	}{{c.Success, SeenSuccess}, {c.Skipped, SeenSkipped}, {c.Failed, SeenFailed},
		{c.UpstreamFailed, SeenUpstreamFailed}, {c.Upstream - c.Done(), SeenPending}} {
		if k.n > 0 {
			s |= k.bit
		}
	}
	return s
}

// Counts is the smallest Counts whose Seen is s: one upstream of each
// kind s holds (none for the zero Seen: a TI without upstreams).
func (s Seen) Counts() Counts {
	var c Counts
	for _, k := range []struct {
		bit Seen
		n   *int
	}{{SeenSuccess, &c.Success}, {SeenSkipped, &c.Skipped}, {SeenFailed, &c.Failed},
		{SeenUpstreamFailed, &c.UpstreamFailed}} {
		if s&k.bit != 0 {
			*k.n = 1
		}
	}
	c.Upstream = c.Done()
	if s&SeenPending != 0 {
		c.Upstream++
	}
	return c
}

// Table is rule r's decision for every Seen value, indexed by it.
func Table(r Rule) []Decision {
	t := make([]Decision, SeenCombinations)
	for i := range t {
		t[i] = Decide(r, Seen(i).Counts())
	}
	return t
}

package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// SkewSeen is what the log times of one agent instance say of its wall
// clock: Set is the offset the harness gave it, Seen the median over its
// attempts of the first log line's time (its clock) less the attempt's
// start record (the harness's), N the attempts measured. A skewed agent
// whose Seen is far from Set did not run skewed, and the run proved
// nothing about skew.
type SkewSeen struct {
	Instance string
	Set      time.Duration
	Seen     time.Duration
	N        int
}

// skewsSeen measures every agent instance's clock from its log times.
func skewsSeen(h *History) []SkewSeen {
	byInst := map[string][]time.Duration{}
	for _, ex := range h.Executions {
		if first := h.Logs[ex.AttemptID].First; !first.IsZero() {
			byInst[ex.Instance] = append(byInst[ex.Instance], first.Sub(ex.Start))
		}
	}
	var out []SkewSeen
	for _, a := range h.Agents {
		ds := byInst[a.Instance]
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		out = append(out, SkewSeen{Instance: a.Instance, Set: a.ClockOffset, Seen: ds[len(ds)/2], N: len(ds)})
	}
	return out
}

// skewLine summarises the skewed instances for the report.
func skewLine(ss []SkewSeen) string {
	var parts []string
	for _, s := range ss {
		if s.Set != 0 {
			parts = append(parts, fmt.Sprintf("%s set %s seen %s (n=%d)", s.Instance, s.Set, s.Seen.Round(time.Millisecond), s.N))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// agentTime converts t, stamped by agent instance inst's wall clock, to
// the harness's clock.
func (h *History) agentTime(inst string, t time.Time) time.Time {
	for _, a := range h.Agents {
		if a.Instance == inst {
			return t.Add(-a.ClockOffset)
		}
	}
	return t
}

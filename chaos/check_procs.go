package chaos

import (
	"fmt"
	"slices"
	"strings"
)

// InvOneProcess is the harness's own invariant: one live process per slot
// and per identity, none left behind (docs/reliability.md, "Supervision").
// A breach makes every other verdict suspect: a leaked replica keeps
// campaigning under its id, and faults aimed at that id hit the other one.
const InvOneProcess = "8 one process per slot"

// checkProcesses: no two harness processes of one role were alive at once
// in the same slot (replica id, agent slot) or under the same identity
// (--replica-id, agent --name), and nothing the harness started outlived
// its stop. The notes count the supervisor's restarts and the processes
// killed because their slot was started again while they lived.
func checkProcesses(h *History) Result {
	r := Result{Invariant: InvOneProcess}
	groups := map[string][]Process{} // by subject: "replica r2", "agent slot agent-1", "agent name agent-1"
	var keys []string
	add := func(k string, p Process) {
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], p)
	}
	var restarts []string
	replaced := 0
	for _, p := range h.Processes {
		r.Checked++
		if p.Role == RoleReplica {
			add("replica "+p.Slot, p) // its slot is its --replica-id
		} else {
			add("agent slot "+p.Slot, p)
			add("agent name "+p.Claim, p)
		}
		if p.Supervised {
			restarts = append(restarts, fmt.Sprintf("%s %s (pid %d) at %s", p.Role, p.Instance, p.PID, p.Started.Format("15:04:05.000")))
		}
		if p.End == EndReplaced {
			replaced++
		}
	}
	for _, k := range keys {
		for _, v := range overlaps(groups[k]) {
			v.Subject = k
			r.Violations = append(r.Violations, v)
		}
	}
	for _, l := range h.Leftovers {
		r.Checked++
		r.Violations = append(r.Violations, Violation{InvOneProcess, h.End, "leftover",
			l + " after the harness stopped the cluster"})
	}
	r.Notes = append(r.Notes, fmt.Sprintf("supervisor restarts after an exit on its own: %d%s", len(restarts), listed(restarts, 5)),
		fmt.Sprintf("processes killed because their slot was started again while they lived: %d", replaced))
	return r
}

// overlaps reports each process of ps that started while an earlier one
// of ps was still alive (never seen to exit: alive to the end).
func overlaps(ps []Process) []Violation {
	ps = slices.Clone(ps)
	slices.SortStableFunc(ps, func(a, b Process) int { return a.Started.Compare(b.Started) })
	var out []Violation
	for i, p := range ps {
		for _, q := range ps[:i] {
			if !q.Ended.IsZero() && !q.Ended.After(p.Started) {
				continue
			}
			until := "never seen to exit"
			if !q.Ended.IsZero() {
				until = "until " + q.Ended.Format("15:04:05.000")
			}
			out = append(out, Violation{Invariant: InvOneProcess, At: p.Started,
				Detail: fmt.Sprintf("%s (pid %d) started at %s while %s (pid %d, started %s) was alive, %s",
					p.Instance, p.PID, p.Started.Format("15:04:05.000"), q.Instance, q.PID, q.Started.Format("15:04:05.000"), until)})
			break
		}
	}
	return out
}

// listed renders up to n items after a colon, with a count of the rest.
func listed(items []string, n int) string {
	if len(items) == 0 {
		return ""
	}
	s := ": " + strings.Join(items[:min(n, len(items))], ", ")
	if len(items) > n {
		s += fmt.Sprintf(" and %d more", len(items)-n)
	}
	return s
}

package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Report is a chaos run's outcome: what was injected, what was checked,
// what broke, and the SLA and failover figures.
type Report struct {
	Seed       int64             // the first phase's seed
	Planned    int               // faults planned, all phases
	Injected   map[FaultKind]int // faults injected, by kind
	Verdict    Verdict           // the checker's output
	Executions int               // attempts in the journal
	Runs       int               // runs in the database
	Events     int               // events in the database
	history    *History
}

// NewReport summarises a checked history.
func NewReport(cfg Config, h *History, v Verdict, plan []Fault) *Report {
	r := &Report{Seed: cfg.Seed, Planned: len(plan), Injected: map[FaultKind]int{}, Verdict: v,
		Executions: len(h.Executions), Runs: len(h.Runs), Events: len(h.Events), history: h}
	for _, f := range h.Faults {
		r.Injected[f.Kind]++
	}
	return r
}

// Total is the number of faults injected.
func (r *Report) Total() int {
	n := 0
	for _, c := range r.Injected {
		n += c
	}
	return n
}

// Violations is every violation found.
func (r *Report) Violations() []Violation { return r.Verdict.Violations() }

// percentiles formats p50, p95, p99 and max of ds.
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "n=0"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return fmt.Sprintf("n=%d p50=%s p95=%s p99=%s max=%s", len(s), at(0.50).Round(time.Millisecond),
		at(0.95).Round(time.Millisecond), at(0.99).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}

// Text renders the report: faults per kind, invariants with counts,
// violations with the seed and a timeline excerpt, SLA percentiles and
// failover times.
func (r *Report) Text() string {
	var b strings.Builder
	b.WriteString("chaos report\n")
	for i, p := range r.history.Phases {
		fmt.Fprintf(&b, "phase %d: seed %d, %d faults from %s (replay: CHAOS_SEED=%d CHAOS_FAULTS=%d make chaos)\n",
			i+1, p.Seed, p.Faults, p.From.Format(time.RFC3339), p.Seed, p.Faults)
	}
	fmt.Fprintf(&b, "faults injected: %d of %d planned\n", r.Total(), r.Planned)
	for _, k := range AllKinds {
		fmt.Fprintf(&b, "  %-28s %d\n", k, r.Injected[k])
	}
	if n := r.Injected[PostgresFailover]; n > 0 {
		fmt.Fprintf(&b, "  %-28s %d (Patroni: in place of the PostgreSQL restarts)\n", PostgresFailover, n)
	}
	fmt.Fprintf(&b, "lanes: fault start behind plan: %s\n", lagSummary(r.history.Faults))
	fmt.Fprintf(&b, "workload: %d runs, %d executions, %d events\n", r.Runs, r.Executions, r.Events)
	b.WriteString("invariants:\n")
	for _, res := range r.Verdict.Results {
		fmt.Fprintf(&b, "  %-26s checked %5d  excluded %4d  violations %d\n", res.Invariant, res.Checked, res.Excluded, len(res.Violations))
		for _, n := range res.Notes {
			fmt.Fprintf(&b, "      note: %s\n", n)
		}
	}
	fmt.Fprintf(&b, "SLA: reap latency after becoming stuck: %s\n", percentiles(r.Verdict.ReapLatency))
	fmt.Fprintf(&b, "SLA: runs live at the last fault, terminal after it: %s\n", percentiles(r.Verdict.RunLatency))
	var elected, fenced []time.Duration
	etcdDown := 0
	for _, f := range r.Verdict.Failovers {
		if f.EtcdDown {
			etcdDown++
		}
		if f.New != "" {
			elected = append(elected, f.Elected)
		}
		if f.Fenced > 0 {
			fenced = append(fenced, f.Fenced)
		}
	}
	fmt.Fprintf(&b, "failover: %d leaders lost, %d judged (%d with etcd electing a raft leader within TTL + 2 s)\n",
		len(r.Verdict.Failovers), len(r.Verdict.Failovers)-etcdDown, etcdDown)
	fmt.Fprintf(&b, "failover: leader lost -> etcd names another: %s\n", percentiles(elected))
	fmt.Fprintf(&b, "failover: leader lost -> fence taken by another: %s\n", percentiles(fenced))
	fmt.Fprintf(&b, "reaped executions still alive at the reap: %d\n", len(r.Verdict.ReapedAlive))
	fmt.Fprintf(&b, "agent clock skew (log times less the journal's): %s\n", skewLine(r.Verdict.Skews))
	vs := r.Violations()
	fmt.Fprintf(&b, "violations: %d\n", len(vs))
	for _, v := range vs {
		fmt.Fprintf(&b, "- [%s] %s at %s: %s (seed %d)\n", v.Invariant, v.Subject, v.At.Format(time.RFC3339Nano), v.Detail, r.history.seedAt(v.At))
		b.WriteString(r.timeline(v.At))
	}
	return b.String()
}

// timeline lists the faults active within 10 s of t.
func (r *Report) timeline(t time.Time) string {
	var b strings.Builder
	for _, f := range r.history.Faults {
		if f.End.After(t.Add(-10*time.Second)) && f.Start.Before(t.Add(10*time.Second)) {
			fmt.Fprintf(&b, "    %s..%s %s %s %s\n", f.Start.Format("15:04:05.000"), f.End.Format("15:04:05.000"), f.Kind, f.Target, f.Detail)
		}
	}
	return b.String()
}

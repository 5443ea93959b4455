// Package metrics defines Vigil's Prometheus collectors (prefix vigil_) and
// the decision label values, all from docs/design.md §10. One Metrics value is
// created per process and shared by the scheduler, reapers, elector and API.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/vigil-sched/vigil/state"
)

// Decision labels of vigil_scheduler_decisions_total (docs/design.md §6, §7).
// A decision that is also written as a run event is that event's kind
// (package state), so the two never drift.
const (
	DecisionAgentLost         = string(state.EventAgentLost)
	DecisionAgentLostRequeued = string(state.EventAgentLostRequeued)
	DecisionDispatchLost      = string(state.EventDispatchLost)
	// DecisionDispatchLostDeferred labels, in `vigil reap --dry-run` only,
	// a stale queued TI left alone because matching agents are alive but
	// busy. It is never counted: the backlog is the gauge
	// vigil_dispatch_backlog_tasks.
	DecisionDispatchLostDeferred = "dispatch_lost_deferred"
	DecisionOrphanReaped         = string(state.EventOrphanReaped)
	DecisionOrphanFinalized      = string(state.EventOrphanFinalized)
	DecisionLateCompletion       = string(state.EventLateAccepted)
	DecisionAgentInactive        = "agent_inactive"
	DecisionExecutionTimeout     = string(state.EventExecutionTimeout)
	DecisionRunTimeout           = "run_timeout"
	DecisionRetentionPruned      = "retention_pruned"
	// DecisionReconcileRepaired counts rows the reconcile safety net moved
	// that the incremental scheduler had missed (adr/0011).
	DecisionReconcileRepaired    = "reconcile_repaired"
	DecisionSuffixListError      = "_list_error"
	DecisionSuffixCandidateError = "_error"
)

// Decision labels beyond the reapers' own: late completions, passes the
// mass-silence brake held, and scheduling passes that timed out.
const (
	// DecisionLateCompletionRecorded counts late successes that arrived
	// after their run had ended: recorded on the TI's attempt history,
	// changing nothing (adr/0014-late-success-after-run-end.md).
	DecisionLateCompletionRecorded = string(state.EventLateRecorded)
	// DecisionAgentLostHeld and DecisionDispatchLostHeld count agent-lost
	// and dispatch-lost passes the mass-silence brake held, one per pass
	// (docs/scheduler-resilience.md, "Mass-silence brake").
	DecisionAgentLostHeld    = "agent_lost_held"
	DecisionDispatchLostHeld = "dispatch_lost_held"
	// DecisionTickPassTimeout counts scheduling passes that ran out of
	// time as a tick's first pass and rolled back: the next pass takes
	// half the runs (adr/0011-incremental-scheduler.md, "Amendment").
	DecisionTickPassTimeout = "tick_pass_timeout"
)

// DecisionLabels returns every decision label that is ever counted in
// vigil_scheduler_decisions_total: the Decision* constants (except
// DecisionDispatchLostDeferred, which is never counted) and the list and
// candidate error of each reaper. New initialises each to zero, so that
// rate() and increase() work from a replica's first scrape.
func DecisionLabels() []string {
	labels := []string{
		DecisionAgentLost, DecisionAgentLostRequeued, DecisionDispatchLost,
		DecisionOrphanReaped, DecisionOrphanFinalized, DecisionLateCompletion, DecisionLateCompletionRecorded,
		DecisionAgentInactive, DecisionExecutionTimeout, DecisionRunTimeout, DecisionRetentionPruned,
		DecisionReconcileRepaired, DecisionAgentLostHeld, DecisionDispatchLostHeld, DecisionTickPassTimeout,
	}
	for _, name := range state.Reapers() {
		labels = append(labels, string(name)+DecisionSuffixListError, string(name)+DecisionSuffixCandidateError)
	}
	return labels
}

// Metrics holds every collector, registered on Registry together with the
// Go runtime and process collectors.
type Metrics struct {
	Registry             *prometheus.Registry
	Decisions            *prometheus.CounterVec   // {decision}
	Leader               prometheus.Gauge         // 1 on the leader
	LeaderEpoch          prometheus.Gauge         // this replica's fencing epoch
	LeaderChanges        prometheus.Counter       // leadership gained or lost
	FencedWritesRejected prometheus.Counter       // leader writes refused by the fence
	ReaperDuration       *prometheus.HistogramVec // {reaper}, seconds per sweep
	TickDuration         prometheus.Histogram     // seconds per scheduler tick
	LastTick             prometheus.Gauge         // unix seconds of the last finished tick
	HeartbeatsReceived   prometheus.Counter       // agent heartbeats accepted
	// LogLinesDroppedTotal counts log lines agents lost, as their gap
	// markers report them when first stored (issue 23): each is a line a
	// task printed that no log holds.
	LogLinesDroppedTotal prometheus.Counter
	// DispatchBacklog is the number of queued TIs past the dispatch-lost
	// threshold that a live agent could run but has no room for, or whose
	// task pool has no free slot, per pool (label pool, "" for none), set
	// by every dispatch-lost pass; DispatchBacklogOldest is the age in
	// seconds of the oldest of them (0 when there are none). A backlog is
	// a gauge, not a decision: nothing is decided about it. The pool ""
	// series is always present; a pool's series goes when its backlog
	// does.
	DispatchBacklog       *prometheus.GaugeVec     // {pool}
	DispatchBacklogOldest *prometheus.GaugeVec     // {pool}
	HTTPRequests          *prometheus.CounterVec   // {route, code}
	HTTPDuration          *prometheus.HistogramVec // {route}, seconds

	// LogLinesTruncated counts log lines the API cut to its line limit
	// (api.MaxLogLine) because an agent sent them longer; the honest
	// agent splits lines, so a rise means an old or hostile agent.
	LogLinesTruncated prometheus.Counter
	// AuthFailures counts refused authentications, by how the caller
	// tried (AuthMethods): a bearer token, a session cookie, a sign-in,
	// an agent credential, or a sign-in refused by the per-address
	// throttle before its token was looked at.
	AuthFailures *prometheus.CounterVec
	// UsersFileReloadFailures counts rereads of --users-file that failed
	// (bad YAML, a bad entry): the previous identities stay in effect,
	// and the server log names the file, entry and field.
	UsersFileReloadFailures prometheus.Counter

	// LeaderFenceBlocked is 1 while the PostgreSQL fence refuses this
	// replica's won election (or Lite's epoch): a stored token of another
	// domain, or a revision above the one etcd handed out (an etcd restored
	// from a backup). Nobody leads until `vigil fence reset`; 0 otherwise.
	LeaderFenceBlocked prometheus.Gauge

	// MassSilenceBrake is 1 while the leader's mass-silence brake holds
	// agent-lost and dispatch-lost reaping, else 0.
	MassSilenceBrake prometheus.Gauge

	// TaskInstances is the number of task instances in state queued and
	// in state running ({state}), counted by the leader every sweep
	// interval from the partial index of live task instances, never from
	// history; it saturates at TaskInstancesCap. A follower keeps the
	// value of its last term: read it where vigil_leader is 1.
	TaskInstances *prometheus.GaugeVec

	// ScheduleRunsCreated counts runs created for schedule slots, by
	// run_type: "scheduled" (the leader's schedules service) and
	// "backfill" (a backfill request, on the replica that served it). No
	// dag_id label: the series would grow with the number of DAGs; a
	// DAG's runs and their slot_created / backfill_created events are in
	// the database (docs/schedules.md, "Observability").
	ScheduleRunsCreated *prometheus.CounterVec
	// ScheduleLag observes, for every scheduled run created, the seconds
	// from the slot's due time (the end of its data interval) to the
	// schedules pass that created it, both on the database clock.
	ScheduleLag prometheus.Histogram

	// Notify holds the notification delivery and SLA collectors.
	Notify NotifyMetrics
}

// ScheduleLagBuckets are the buckets of vigil_schedule_lag_seconds, in
// seconds. 60 is one of them: the VigilScheduleLagging alert
// (deploy/prometheus/alerts.yml) counts creations above it.
func ScheduleLagBuckets() []float64 {
	return []float64{0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
}

// ScheduleRunTypes are the run_type labels of
// vigil_schedule_runs_created_total. They mirror store.RunScheduled and
// store.RunBackfill, which this package cannot import; a scheduler test
// checks that they agree.
func ScheduleRunTypes() []string { return []string{"scheduled", "backfill"} }

// AuthMethods are the method labels of vigil_auth_failures_total, each
// exposed at 0 from the start.
func AuthMethods() []string {
	return []string{"bearer", "session", "sign_in", "agent_credential", "rate_limited"}
}

// TaskInstancesCap is where vigil_task_instances saturates: one count
// reads at most this many live task instances.
const TaskInstancesCap = 100000

// TaskInstanceStates are the states vigil_task_instances reports.
func TaskInstanceStates() []string {
	return state.Strings(state.Where(state.TIStates(), state.TI.Dispatched))
}

// New creates and registers every collector on a fresh registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_scheduler_decisions_total", Help: "Reaper and recovery decisions, by decision.",
		}, []string{"decision"}),
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_leader", Help: "1 when this replica leads, else 0.",
		}),
		LeaderEpoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_leader_epoch", Help: "Fencing epoch of this replica's current or last term.",
		}),
		LeaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_leader_changes_total", Help: "Times this replica gained or lost leadership.",
		}),
		LeaderFenceBlocked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_leader_fence_blocked",
			Help: "1 while the leader fence refuses this replica's election (see vigil fence show), else 0.",
		}),
		FencedWritesRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_fenced_writes_rejected_total", Help: "Leader-only writes refused by the PostgreSQL fence.",
		}),
		ReaperDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vigil_reaper_duration_seconds", Help: "Time per reaper sweep.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"reaper"}),
		TickDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vigil_scheduler_tick_duration_seconds", Help: "Time per scheduler tick.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}),
		LastTick: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_scheduler_last_tick_timestamp_seconds", Help: "Unix time the last scheduler tick finished.",
		}),
		HeartbeatsReceived: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_heartbeats_received_total", Help: "Agent heartbeats accepted.",
		}),
		LogLinesDroppedTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_log_lines_dropped_total",
			Help: "Log lines agents dropped (buffer full while disconnected), as counted by the gap markers stored.",
		}),
		DispatchBacklog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vigil_dispatch_backlog_tasks",
			Help: "Queued task instances past the dispatch-lost threshold that a live agent could run but has no room for, or whose pool has no free slot, per task pool.",
		}, []string{"pool"}),
		DispatchBacklogOldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vigil_dispatch_backlog_oldest_seconds", Help: "Age of the oldest task instance in the dispatch backlog, per task pool.",
		}, []string{"pool"}),
		MassSilenceBrake: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_mass_silence_brake",
			Help: "1 while the mass-silence brake holds agent-lost and dispatch-lost reaping, else 0.",
		}),
		TaskInstances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vigil_task_instances",
			Help: "Task instances queued or running (by state), counted by the leader from the live-TI index; saturates at 100000.",
		}, []string{"state"}),
		ScheduleRunsCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_schedule_runs_created_total", Help: "Runs created for schedule slots, by run_type (scheduled or backfill).",
		}, []string{"run_type"}),
		ScheduleLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "vigil_schedule_lag_seconds",
			Help:    "Delay from a slot's due time (its data interval's end) to the creation of its scheduled run, database clock.",
			Buckets: ScheduleLagBuckets(),
		}),
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_http_requests_total", Help: "API requests by route and status code.",
		}, []string{"route", "code"}),
		LogLinesTruncated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_log_lines_truncated_total", Help: "Log lines the API truncated to its 64 KiB line limit.",
		}),
		AuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vigil_auth_failures_total",
			Help: "Refused authentications, by method (bearer, session, sign_in, agent_credential, rate_limited).",
		}, []string{"method"}),
		UsersFileReloadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_users_file_reload_failures_total",
			Help: "Rereads of the users file that failed; the previous identities stay in effect.",
		}),
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vigil_http_request_duration_seconds", Help: "API latency by route.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route"}),
		Notify: newNotifyMetrics(),
	}
	m.Notify.register(m.Registry)
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.Decisions, m.Leader, m.LeaderEpoch, m.LeaderChanges, m.LeaderFenceBlocked, m.FencedWritesRejected,
		m.ReaperDuration, m.TickDuration, m.LastTick, m.HeartbeatsReceived, m.HTTPRequests, m.HTTPDuration,
		m.DispatchBacklog, m.DispatchBacklogOldest, m.MassSilenceBrake, m.TaskInstances,
		m.ScheduleRunsCreated, m.ScheduleLag, m.LogLinesTruncated, m.LogLinesDroppedTotal, m.AuthFailures,
		m.UsersFileReloadFailures,
	)
	// From zero: every decision and every reaper's duration exists before
	// anything happens, so rate() has a first sample to start from.
	for _, d := range DecisionLabels() {
		m.Decisions.WithLabelValues(d)
	}
	for _, name := range state.Reapers() {
		m.ReaperDuration.WithLabelValues(string(name))
	}
	// The backlog of no pool exists from the start, 0 until measured.
	m.DispatchBacklog.WithLabelValues("")
	m.DispatchBacklogOldest.WithLabelValues("")
	for _, st := range TaskInstanceStates() {
		m.TaskInstances.WithLabelValues(st)
	}
	for _, rt := range ScheduleRunTypes() {
		m.ScheduleRunsCreated.WithLabelValues(rt)
	}
	for _, am := range AuthMethods() {
		m.AuthFailures.WithLabelValues(am)
	}
	return m
}

// Decide increments vigil_scheduler_decisions_total{decision}.
func (m *Metrics) Decide(decision string) { m.Decisions.WithLabelValues(decision).Inc() }

// LogLinesDropped adds n to vigil_log_lines_dropped_total.
func (m *Metrics) LogLinesDropped(n int64) { m.LogLinesDroppedTotal.Add(float64(n)) }

// DecisionCounts reads vigil_scheduler_decisions_total back as a map of
// decision label to count since this process started (the console's
// Cluster page; every label is present from zero).
func (m *Metrics) DecisionCounts() map[string]int64 {
	out := make(map[string]int64, len(DecisionLabels()))
	ch := make(chan prometheus.Metric, 64)
	go func() {
		m.Decisions.Collect(ch)
		close(ch)
	}()
	for metric := range ch {
		var pb dto.Metric
		if err := metric.Write(&pb); err != nil || pb.Counter == nil {
			continue
		}
		for _, l := range pb.Label {
			if l.GetName() == "decision" {
				out[l.GetValue()] = int64(pb.Counter.GetValue())
			}
		}
	}
	return out
}

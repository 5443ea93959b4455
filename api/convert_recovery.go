package api

import (
	"encoding/json"
	"fmt"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/cluster"
	"github.com/vigil-sched/vigil/reaper"
)

// Conversions of the recovery and cluster views (package reaper's and
// package cluster's own types) to the wire's JSON shapes: typed reaper
// names and states become their strings, durations protocol.Durations,
// and the lists the wire promises as [] stay non-nil.

func toReapReport(r reaper.Report) protocol.ReapReport {
	return protocol.ReapReport{DryRun: r.DryRun, Grace: toGrace(r.Grace), Errors: r.Errors,
		Candidates: nonNilSlice(convertSlice(r.Candidates, func(c reaper.Candidate) protocol.ReapCandidate {
			return protocol.ReapCandidate{Reaper: string(c.Reaper), Decision: c.Decision, RunID: c.RunID, TIID: c.TIID,
				TaskID: c.TaskID, TryNumber: c.TryNumber, AgentID: c.AgentID, Signal: c.Signal, SignalAt: c.SignalAt,
				Age: protocol.Duration(c.Age), Message: c.Message, Applied: c.Applied}
		}))}
}

func toGrace(g []reaper.GraceNotice) []protocol.GraceNotice {
	return convertSlice(g, func(n reaper.GraceNotice) protocol.GraceNotice {
		return protocol.GraceNotice{Reaper: string(n.Reaper), Message: n.Message}
	})
}

func toAtRisk(a reaper.AtRiskReport) protocol.AtRisk {
	return protocol.AtRisk{Now: a.Now, HeartbeatInterval: protocol.Duration(a.HeartbeatInterval),
		Thresholds: toProtocol(a.Thresholds), RunHorizon: protocol.Duration(a.RunHorizon), Grace: toGrace(a.Grace),
		Running: nonNilSlice(convertSlice(a.Running, func(r reaper.AtRiskRunning) protocol.AtRiskRunning {
			return protocol.AtRiskRunning{RunID: r.RunID, TIID: r.TIID, TaskID: r.TaskID, TryNumber: r.TryNumber,
				AgentID: r.AgentID, Started: r.Started, LastHeartbeatAt: r.LastHeartbeatAt, Silent: protocol.Duration(r.Silent),
				Overdue: protocol.Duration(r.Overdue), TimeLeft: protocol.Duration(r.TimeLeft), Decision: string(r.Decision),
				Outcome: r.Outcome}
		})),
		Queued: nonNilSlice(convertSlice(a.Queued, func(q reaper.AtRiskQueued) protocol.AtRiskQueued {
			return protocol.AtRiskQueued{RunID: q.RunID, TIID: q.TIID, TaskID: q.TaskID, TryNumber: q.TryNumber,
				QueuedAt: q.QueuedAt, Queued: protocol.Duration(q.Queued), RequiredTags: q.RequiredTags,
				MissingTags: q.MissingTags, ActiveAgents: q.ActiveAgents, TimeLeft: protocol.Duration(q.TimeLeft),
				Outcome: q.Outcome}
		})),
		Runs: nonNilSlice(convertSlice(a.Runs, func(r reaper.AtRiskRun) protocol.AtRiskRun {
			return protocol.AtRiskRun{RunID: r.RunID, DAGID: r.DAGID, State: string(r.State), Timeout: protocol.Duration(r.Timeout),
				Deadline: r.Deadline, TimeLeft: protocol.Duration(r.TimeLeft)}
		})),
	}
}

// ReplicaReport is the wire shape of a replica's scheduler status, as
// cluster.Publisher stores it and GET /v1/cluster shows it.
func ReplicaReport(s reaper.Status) protocol.ReplicaReport {
	out := protocol.ReplicaReport{Decisions: s.Decisions, GraceStart: s.GraceStart, GraceEnds: s.GraceEnds,
		BrakeEngaged: s.BrakeEngaged, BrakeMessage: s.BrakeMessage,
		Reapers: nonNilSlice(convertSlice(s.Reapers, func(w reaper.Sweep) protocol.ReaperSweep {
			return protocol.ReaperSweep{Reaper: string(w.Reaper), At: w.At, Duration: protocol.Duration(w.Duration),
				Candidates: w.Candidates, Applied: w.Applied, Errors: w.Errors}
		}))}
	if out.Decisions == nil {
		out.Decisions = map[string]int64{}
	}
	return out
}

// toCluster decodes each replica's stored report (a protocol.ReplicaReport
// in JSON) into the reply. Errors: a report that is not one.
func toCluster(v cluster.View) (protocol.Cluster, error) {
	out := protocol.Cluster{Now: v.Now, Leader: v.Leader, Epoch: v.Epoch, Self: v.Self, Replicas: []protocol.Replica{}}
	for _, r := range v.Replicas {
		rep := protocol.Replica{ReplicaID: r.ReplicaID, Leading: r.Leading, Epoch: r.Epoch, Version: r.Version,
			StartedAt: r.StartedAt, SeenAt: r.SeenAt, SeenAgo: protocol.Duration(r.SeenAgo)}
		if err := json.Unmarshal(r.Report, &rep.ReplicaReport); err != nil {
			return out, fmt.Errorf("replica %s: report: %w", r.ReplicaID, err)
		}
		if rep.Reapers == nil {
			rep.Reapers = []protocol.ReaperSweep{}
		}
		if rep.Decisions == nil {
			rep.Decisions = map[string]int64{}
		}
		out.Replicas = append(out.Replicas, rep)
	}
	return out, nil
}

// nonNilSlice returns s, or an empty slice for nil: a list the wire
// promises as [].
func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

package chaos

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/metrics"
)

// Pure-logic tests of the checker: a clean hand-made history passes every
// invariant, and each invariant reports a history made to break it.

var t0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// cleanHistory: agent a0-1 runs attempt A (TI 1) from 1s to 5s, which
// succeeds; agent a1-1 runs attempt B (TI 2) from 2s, is stopped from 3s
// to 20s, B is reaped at 10s (impaired since 3s: 7s later, within the
// 6s + 0.25s + 2s bound) and its retry C runs on a0-1 from 12s to 14s;
// B's process dies at 21s once its agent resumed. One leader, r1, lost by
// kill at 30s, r2 elected at 32s.
func cleanHistory() *History {
	return &History{
		Seed:   1,
		Timing: DefaultTiming,
		Executions: []Execution{
			{AttemptID: "A", TIID: 1, RunID: 1, TaskID: "t", Try: 1, PID: 10, Instance: "a0-1", Start: at(1), End: at(5), Printed: 3},
			{AttemptID: "B", TIID: 2, RunID: 1, TaskID: "u", Try: 1, PID: 11, Instance: "a1-1", Start: at(2), Gone: at(21)},
			{AttemptID: "C", TIID: 2, RunID: 1, TaskID: "u", Try: 2, PID: 12, Instance: "a0-1", Start: at(12), End: at(14), Printed: 2},
		},
		Faults: []FaultRecord{
			{Kind: AgentStopLong, Target: "a1-1", Start: at(3), End: at(20)},
			{Kind: LeaderKill, Target: "r1", Start: at(30), End: at(31)},
		},
		Agents: []AgentInstance{
			{Instance: "a0-1", Name: "agent-0", Started: at(0)},
			{Instance: "a1-1", Name: "agent-1", Started: at(0)},
		},
		Events: []Event{
			{ID: 1, RunID: 1, Kind: "run_started", Epoch: 100, Committed: at(0.5)},
			{ID: 2, RunID: 1, TIID: 2, Kind: metrics.DecisionAgentLost, AttemptID: "B", Try: 1, Epoch: 100, Committed: at(10)},
			{ID: 3, RunID: 1, Kind: "run_success", Epoch: 200, Committed: at(33)},
		},
		TIs: []TaskInstance{
			{ID: 1, RunID: 1, TaskID: "t", State: "success", AttemptID: "A", Try: 1},
			{ID: 2, RunID: 1, TaskID: "u", State: "success", AttemptID: "C", Try: 2},
		},
		Runs: []RunRow{{ID: 1, DAG: "d", State: "success", Created: at(0), Ended: at(33)}},
		Logs: map[string]AttemptLogs{"A": {Received: 3}, "C": {Received: 2}},
		Fence: []FenceChange{
			{Epoch: 100, Holder: "r1", Committed: at(0)},
			{Epoch: 200, Holder: "r2", Committed: at(32.5)},
		},
		Leaders: []LeaderSample{
			{At: at(29), Etcd: "r1", EtcdOK: true, Claiming: []string{"r1"}},
			{At: at(32), Etcd: "r2", EtcdOK: true, Claiming: []string{"r2"}},
		},
		RunBound:  map[string]time.Duration{"d": 10 * time.Second},
		Processes: cleanProcesses(),
		End:       at(40),
	}
}

func violationsOf(v Verdict, inv string) []Violation {
	for _, r := range v.Results {
		if r.Invariant == inv {
			return r.Violations
		}
	}
	return nil
}

func TestCleanHistoryPasses(t *testing.T) {
	v := Check(cleanHistory())
	assert.Empty(t, v.Violations())
	for _, r := range v.Results {
		assert.Positive(t, r.Checked, r.Invariant)
	}
	require.Len(t, v.ReapedAlive, 1, "B was reaped while its process lived on")
	require.Len(t, v.Failovers, 1)
	assert.Equal(t, 2*time.Second, v.Failovers[0].Elected)
}

func TestInvariantsReportViolations(t *testing.T) {
	for _, c := range []struct {
		inv    string
		mutate func(h *History)
	}{
		{InvNoLiveFailed, func(h *History) {
			h.Faults[0].Kind = AgentLatency // a1-1 was never unable: B was reaped while it could heartbeat
		}},
		{InvSLA, func(h *History) { h.Runs[0].Ended, h.Runs[0].State = time.Time{}, "running" }},
		{InvSLA, func(h *History) { h.Events[1].Committed = at(12) }}, // 9s after becoming stuck
		{InvFencing, func(h *History) { h.Events[2].Epoch = 100 }},    // epoch 100 wrote after the fence moved to 200
		{InvFencing, func(h *History) { h.Events[0].Epoch = 150 }},    // an epoch the fence never held
		{InvNoLostSuccess, func(h *History) { h.TIs[0].State = "failed" }},
		{InvLogs, func(h *History) { h.Logs["A"] = AttemptLogs{Received: 2} }},
		{InvLogs, func(h *History) { h.Logs["A"] = AttemptLogs{Received: 3, Markers: []time.Time{at(2), at(2)}} }},
		{InvLogs, func(h *History) {
			h.Faults = append(h.Faults, FaultRecord{Kind: AgentPartitionShort, Target: "a0-1", Start: at(1.2), End: at(4.8), Detail: "cut"})
		}},
		{InvLiveness, func(h *History) { h.Leaders[1].Etcd = "r1" }}, // nobody replaced r1
		{InvLiveness, func(h *History) {
			for s := 33.0; s < 40; s += 0.5 {
				h.Leaders = append(h.Leaders, LeaderSample{At: at(s), Etcd: "r2", EtcdOK: true, Claiming: []string{"r1", "r2"}})
			}
		}},
		{InvNoDuplicate, func(h *History) { h.Events = h.Events[:1] }},       // C started while B ran, B never reaped
		{InvNoDuplicate, func(h *History) { h.Executions[1].Gone = at(30) }}, // B outlived its agent's recovery
	} {
		h := cleanHistory()
		c.mutate(h)
		got := violationsOf(Check(h), c.inv)
		assert.NotEmpty(t, got, "invariant %s must report the broken history", c.inv)
		for _, v := range got {
			assert.NotEmpty(t, v.Detail)
		}
	}
}

func TestImpairmentsFollowTheFaults(t *testing.T) {
	h := cleanHistory()
	assert.False(t, h.ableThroughout("a1-1", at(4), at(10)), "stopped")
	assert.True(t, h.ableThroughout("a1-1", at(24), at(29)), "resumed and reconnected")
	assert.False(t, h.ableThroughout("a1-1", at(29), at(31)), "the leader's kill: the failover bound")
	assert.Equal(t, at(23), h.ableAgain("a1-1", at(10)), "stop end + reconnect bound")
	assert.Equal(t, at(3), h.impairedSince("a1-1", at(10)))
	h.Agents[1].Ended, h.Agents[1].Killed = at(25), true
	assert.True(t, h.ableAgain("a1-1", at(26)).IsZero(), "a killed instance never comes back")
}

func TestSLACountsSilenceFromTheLeadersGraceRestart(t *testing.T) {
	h := cleanHistory()
	h.Events[1].Committed = at(16) // 13s after a1-1 stopped
	require.NotEmpty(t, violationsOf(Check(h), InvSLA))
	h.Graces = []GraceRestart{{Replica: "r2", At: at(9)}}
	require.NotEmpty(t, violationsOf(Check(h), InvSLA), "another replica's grace restart does not count")
	h.Graces = []GraceRestart{{Replica: "r1", At: at(9)}} // the reaping leader could not see agents until 9s
	assert.Empty(t, violationsOf(Check(h), InvSLA))
}

func TestNoLostCompletionScope(t *testing.T) {
	h := cleanHistory()
	h.TIs[0].State = "failed"
	require.NotEmpty(t, violationsOf(Check(h), InvNoLostSuccess))
	h.Timeouts = map[string]time.Duration{"t": 2 * time.Second} // A ran 4s: past its timeout
	assert.Empty(t, violationsOf(Check(h), InvNoLostSuccess))
	h.Timeouts = nil
	h.Agents[0].Ended, h.Agents[0].Killed = at(5.5), true // killed right after A ended
	assert.Empty(t, violationsOf(Check(h), InvNoLostSuccess))
}

func TestASlowDatabaseImpairsOnlyPastTheRequestTimeout(t *testing.T) {
	h := cleanHistory()
	h.Faults = append(h.Faults, FaultRecord{Kind: DatabaseSlow, Target: "postgres", Start: at(24), End: at(26), Detail: "50ms"})
	assert.True(t, h.ableThroughout("a1-1", at(24), at(29)), "50ms each way keeps requests within 1s")
	h.Faults[len(h.Faults)-1].Detail = "80ms"
	assert.True(t, h.ableThroughout("a1-1", at(24), at(29)), "80ms each way keeps a register's 6 round trips within 1s")
	h.Faults[len(h.Faults)-1].Detail = "98ms"
	assert.False(t, h.ableThroughout("a1-1", at(24), at(29)), "98ms each way over a register's 6 round trips does not")
}

func TestSLACountsSilenceFromTheBrakesRelease(t *testing.T) {
	h := cleanHistory()
	h.Events[1].Committed = at(16)
	require.NotEmpty(t, violationsOf(Check(h), InvSLA))
	h.Leaders = append(h.Leaders, LeaderSample{At: at(9), Etcd: "r1", EtcdOK: true, Claiming: []string{"r1"}, Braking: []string{"r1"}})
	slices.SortFunc(h.Leaders, func(a, b LeaderSample) int { return a.At.Compare(b.At) })
	assert.Empty(t, violationsOf(Check(h), InvSLA), "the brake held reaping until 9s")
}

func TestSilenceStartsAtTheLastFaultNotItsReconnectBound(t *testing.T) {
	h := cleanHistory()
	h.Faults = append(h.Faults, FaultRecord{Kind: AgentKill, Target: "a1-1", Start: at(21)})
	assert.Equal(t, at(21), h.impairedSince("a1-1", at(25)), "the stop ended at 20s; the agent could heartbeat again before the kill")
	assert.Equal(t, at(3), h.merged("a1-1")[1].From, "padded, the stop and the kill merge")
}

// The 1,000-fault run of 2026-11-24 02:45 (seed 1124): agent a0-30 was
// stopped from 03:05:11.67 to 19.96, heartbeated on resuming and was
// killed at 20.46; a replica cut from the database at 18.67 (failover
// bound to 20.67) bridged the stop and the kill, so the checker dated the
// silence from the stop (after the leader's grace restart at 15.62) and
// reported the reap at 26.00, 6.04 s after the resumed heartbeat, as
// 10.4 s late. Silence is dated by the faults that certainly silenced
// the agent.
func TestAReplicaFaultDoesNotBridgeAnAgentsOwnFaults(t *testing.T) {
	h := cleanHistory()
	h.Faults = append(h.Faults,
		FaultRecord{Kind: ReplicaDBCut, Target: "r2", Start: at(19), End: at(24), Detail: "blackhole"},
		FaultRecord{Kind: AgentKill, Target: "a1-1", Start: at(20.5)})
	h.Events[1].Committed = at(26.5) // 6s after the kill, 23.5s after the stop began
	assert.Equal(t, at(20.5), h.impairedSince("a1-1", at(26.5)), "a1-1 could heartbeat between its stop and its kill")
	assert.Empty(t, violationsOf(Check(h), InvSLA))
	assert.False(t, h.ableThroughout("a1-1", at(19.5), at(20.5)), "invariant 1 still counts the replica's failover bound")
	h.Events[1].Committed = at(29) // 8.5s after the kill: late
	assert.NotEmpty(t, violationsOf(Check(h), InvSLA))
}

// The fourth 1,000-fault run (seed 1124, 2026-11-24 03:46): task quick
// exited 0 on a3-7 at 03:53:09.55, a quarter second before a black-holed
// partition (09.81–17.39) that a slow database (237 ms each way, 15.86–
// 23.79) prolonged; the agent buffered the completion and was killed at
// 21.38 without reaching the control plane again. The checker took the
// quarter second as a chance to report and called the success lost.
func TestASuccessWhoseAgentNeverHadAWindowToReportIsOutOfScope(t *testing.T) {
	h := cleanHistory()
	h.Executions[0].End = at(4.75) // A exits 0.25s before its agent is partitioned
	h.Executions[0].Instance = "a0-1"
	h.TIs[0].State = "up_for_retry"
	h.Faults = append(h.Faults,
		FaultRecord{Kind: AgentPartitionLong, Target: "a0-1", Start: at(5), End: at(11), Detail: "blackhole"})
	h.Agents[0].Ended, h.Agents[0].Killed = at(12), true // killed within the reconnect bound after the partition
	assert.Empty(t, violationsOf(Check(h), InvNoLostSuccess), "0.25s of link before the partition is no window to report")
	h.Faults[len(h.Faults)-1].Start = at(8) // the partition begins 3.25s after the exit: time enough
	assert.NotEmpty(t, violationsOf(Check(h), InvNoLostSuccess))
}

func TestSLAStretchesByASlowDatabase(t *testing.T) {
	h := cleanHistory()
	h.Events[1].Committed = at(13) // 10s after a1-1 stopped
	require.NotEmpty(t, violationsOf(Check(h), InvSLA))
	h.Faults = append(h.Faults, FaultRecord{Kind: DatabaseSlow, Target: "postgres", Start: at(8), End: at(11), Detail: "30ms"})
	assert.Empty(t, violationsOf(Check(h), InvSLA), "3s of slow statements stretch the 8.25s bound to 11.25s")
}

func TestRecheckJudgesASavedHistoryAgain(t *testing.T) {
	dir := t.TempDir()
	h := cleanHistory()
	h.Phases = []Phase{{Seed: 1, Faults: 2, From: at(0)}}
	require.NoError(t, SaveHistory(dir+"/history.json", h))
	rep, err := Recheck(dir+"/history.json", dir+"/report.txt")
	require.NoError(t, err)
	assert.Empty(t, rep.Violations())
	assert.Equal(t, 2, rep.Total())
	assert.Contains(t, rep.Text(), "phase 1: seed 1, 2 faults")

	h.TIs[0].State = "failed"
	require.NoError(t, SaveHistory(dir+"/history.json", h))
	rep, err = Recheck(dir+"/history.json", "")
	require.NoError(t, err)
	require.Len(t, rep.Violations(), 1)
	assert.Contains(t, rep.Text(), "[4 no lost completion] attempt A")
}

func TestARequeuedAttemptStillRunningIsReapedAlive(t *testing.T) {
	h := cleanHistory()
	h.Events[1].Kind = metrics.DecisionAgentLostRequeued // judged never started; the journal says it ran
	h.Executions[2].Try = 1                              // a requeue keeps the try
	v := Check(h)
	assert.Empty(t, violationsOf(v, InvNoDuplicate), "its agent was stopped; the process died in time")
	require.Len(t, v.ReapedAlive, 1)
}

// The second 1,000-fault run (TI 1520): the agent of attempt B was
// stopped between its claim reply and the spawn; the reaper requeued B as
// never started, C (the same try) was claimed and started elsewhere, and
// B's process started only when its agent resumed, overlapping C until
// the agent stopped it. B is the reaped execution although it started
// second.
func TestARequeuedAttemptSpawnedLateIsReapedAlive(t *testing.T) {
	late := func() *History {
		h := cleanHistory()
		h.Events[1].Kind = metrics.DecisionAgentLostRequeued
		h.Executions[1].Start, h.Executions[1].Gone = at(20.1), at(22) // spawned once a1-1 resumed at 20s
		h.Executions[2].Try, h.Executions[2].End = 1, at(24)
		return h
	}
	v := Check(late())
	assert.Empty(t, violationsOf(v, InvNoDuplicate), "B was requeued before C started and died in time")
	require.Len(t, v.ReapedAlive, 1)
	assert.Equal(t, "B", v.ReapedAlive[0].AttemptID)

	h := late()
	h.Executions[1].Gone = at(40) // B outlived its agent's recovery
	assert.NotEmpty(t, violationsOf(Check(h), InvNoDuplicate))

	h = late()
	h.Events[1].Committed = at(13) // reaped only after C had started: C ran beside a live attempt
	assert.NotEmpty(t, violationsOf(Check(h), InvNoDuplicate))
}

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
// succeeds; agent a1-1 runs attempt B (TI 2) from 2s, heartbeats it at
// 2.5s, is stopped from 3s to 20s, B is reaped at 10s (7.5s after that
// heartbeat: past the 6s threshold, within the 6s + 0.25s + 2s bound) and
// its retry C runs on a0-1 from 12s to 14s; B's process dies at 21s once
// its agent resumed. One leader, r1, lost by kill at 30s, r2 elected at
// 32s.
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
		Runs: []RunRow{{ID: 1, DAG: "d", State: "success", Created: at(0), Ended: at(33)},
			scheduledRun(2, 0, 3.1), scheduledRun(3, 3, 6.2), scheduledRun(4, 6, 9.1)},
		// Slots every 3s from 0s: those at 0, 3 and 6s were due (at 3, 6
		// and 9s) by the end of the fault phase at 10s.
		Schedule: ScheduleRecord{DAG: "s", Start: at(0), Every: 3 * time.Second, DueBy: at(10), Paused: at(11)},
		Logs:     map[string]AttemptLogs{"A": {Received: 3}, "C": {Received: 2}},
		Fence: []FenceChange{
			{Epoch: 100, Holder: "r1", Committed: at(0)},
			{Epoch: 200, Holder: "r2", Committed: at(32.5)},
		},
		Leaders: []LeaderSample{
			{At: at(29), Etcd: "r1", EtcdOK: true, Claiming: []string{"r1"}},
			{At: at(32), Etcd: "r2", EtcdOK: true, Claiming: []string{"r2"}},
		},
		Acks: []HeartbeatAck{
			{Instance: "a0-1", At: at(1.5), Attempts: []string{"A"}},
			{Instance: "a1-1", At: at(2.5), Attempts: []string{"B"}},
			{Instance: "a0-1", At: at(2.5), Attempts: []string{"A"}},
			{Instance: "a0-1", At: at(3.5), Attempts: []string{"A"}},
			{Instance: "a0-1", At: at(4.5), Attempts: []string{"A"}},
			{Instance: "a0-1", At: at(12.5), Attempts: []string{"C"}},
			{Instance: "a0-1", At: at(13.5), Attempts: []string{"C"}},
		},
		LeaderWrites: []LeaderWrite{
			{TxID: 1, Epoch: 100, Table: "schedules", Committed: at(20)},
			{TxID: 2, Epoch: 200, Table: "task_instances", Committed: at(34)},
		},
		RunBound:  map[string]time.Duration{"d": 10 * time.Second, "s": 3 * time.Second},
		Processes: cleanProcesses(),
		End:       at(40),
	}
}

// scheduledRun is run id of DAG "s" for the slot at logical (seconds),
// created at created and ended a second later.
func scheduledRun(id int64, logical, created float64) RunRow {
	return RunRow{ID: id, DAG: "s", State: "success", Type: runTypeScheduled, LogicalDate: at(logical),
		Created: at(created), Ended: at(created + 1)}
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
		{InvNoLiveFailed, func(h *History) { // B heartbeated at 5s, reaped at 10s
			h.Acks = append(h.Acks, HeartbeatAck{Instance: "a1-1", At: at(5), Attempts: []string{"B"}})
		}},
		{InvNoLiveFailed, func(h *History) { // an acknowledged heartbeat after the reap
			h.Acks = append(h.Acks, HeartbeatAck{Instance: "a1-1", At: at(10.5), Attempts: []string{"B"}})
		}},
		// The hand-made histories of issue 24, which the impairment-excused
		// rule passed:
		{InvNoLiveFailed, func(h *History) { // a 1s SIGSTOP, then agent_lost 3s after it
			h.Faults = append(h.Faults, FaultRecord{Kind: AgentStopShort, Target: "a0-1", Start: at(3.6), End: at(4.6)})
			h.Events = append(h.Events, Event{ID: 4, RunID: 1, TIID: 1, Kind: metrics.DecisionAgentLost, AttemptID: "A", Try: 1, Epoch: 100, Committed: at(7.6)})
		}},
		{InvNoLiveFailed, func(h *History) { // the new term reaps an attempt of an unimpaired agent 2.5s in
			h.Executions = append(h.Executions, Execution{AttemptID: "D", TIID: 3, RunID: 1, TaskID: "v", Try: 1, Instance: "a0-1", Start: at(31)})
			for s := 31.5; s < 35; s++ {
				h.Acks = append(h.Acks, HeartbeatAck{Instance: "a0-1", At: at(s), Attempts: []string{"D"}})
			}
			h.Events = append(h.Events, Event{ID: 4, RunID: 1, TIID: 3, Kind: metrics.DecisionAgentLost, AttemptID: "D", Try: 1, Epoch: 200, Committed: at(35)})
		}},
		{InvNoLiveFailed, func(h *History) { // a started attempt requeued on a fault-free agent
			h.Events = append(h.Events, Event{ID: 4, RunID: 1, TIID: 1, Kind: metrics.DecisionAgentLostRequeued, AttemptID: "A", Try: 1, Epoch: 100, Committed: at(4)})
		}},
		{InvNoLiveFailed, func(h *History) { // dispatch_lost of an acknowledged attempt
			h.Events = append(h.Events, Event{ID: 4, RunID: 1, TIID: 2, Kind: metrics.DecisionDispatchLost, AttemptID: "C", Try: 2, Epoch: 100, Committed: at(14)})
		}},
		{InvSLA, func(h *History) { h.Runs[0].Ended, h.Runs[0].State = time.Time{}, "running" }},
		{InvSLA, func(h *History) { h.Events[1].Committed = at(12) }}, // 9.5s after its last heartbeat
		{InvSLA, func(h *History) { // a 1ms slowdown across the window does not excuse a reap 13s late
			h.Events[1].Committed = at(15.5)
			h.Faults = append(h.Faults, FaultRecord{Kind: DatabaseSlow, Target: "postgres", Start: at(2), End: at(16), Detail: "1ms"})
		}},
		{InvSLA, func(h *History) { // no impairment on record: judged all the same, from the last heartbeat
			h.Faults = h.Faults[1:]
			h.Events[1].Committed = at(20)
		}},
		{InvSLA, func(h *History) { // a requeue is held to the same bound
			h.Events[1].Kind, h.Events[1].Committed = metrics.DecisionAgentLostRequeued, at(12)
		}},
		{InvFencing, func(h *History) { h.Events[2].Epoch = 100 }},              // epoch 100 wrote after the fence moved to 200
		{InvFencing, func(h *History) { h.Events[0].Epoch = 150 }},              // an epoch the fence never held
		{InvFencing, func(h *History) { h.Fence[1].Committed = at(36) }},        // 6s after r1's kill: past the 5.5s bound
		{InvFencing, func(h *History) { h.LeaderWrites[0].Committed = at(33) }}, // a next_slot-like write of epoch 100 after the move
		{InvFencing, func(h *History) { h.LeaderWrites[0].Epoch = 0 }},          // a leader session wrote without a fence check
		{InvFencing, func(h *History) { h.LeaderWrites[1].Epoch = 150 }},        // an epoch the fence never held
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
		{InvSlots, func(h *History) { h.Runs = append(h.Runs, scheduledRun(5, 3, 6.4)) }}, // a second run for the slot at 3s
		{InvSlots, func(h *History) { h.Runs = slices.Delete(h.Runs, 2, 3) }},             // the slot at 3s missing before a later one
		{InvSlots, func(h *History) { h.Runs = h.Runs[:3] }},                              // the slot at 6s, due at 9s, missing by 10s
		{InvSlots, func(h *History) { h.Runs[3].LogicalDate = at(4) }},                    // off the grid
		{InvSlots, func(h *History) { h.Runs[1].Created = at(2.5) }},                      // created before its slot was due
		{InvNoDuplicate, func(h *History) { h.Events = h.Events[:1] }},                    // C started while B ran, B never reaped
		{InvNoDuplicate, func(h *History) { h.Executions[1].Gone = at(30) }},              // B outlived its agent's recovery
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
	assert.Equal(t, at(23), h.ableAgain("a1-1", at(10)), "stop end + reconnect bound")
	assert.Equal(t, at(25), h.ableAgain("a1-1", at(25)), "resumed and reconnected")
	assert.Equal(t, at(34), h.ableAgain("a1-1", at(30)), "the leader's kill: its end + the reconnect bound")
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

func TestFenceBoundAndItsExcuses(t *testing.T) {
	assert.Equal(t, 5500*time.Millisecond, DefaultTiming.FenceBound(), "TTL 2s + 2s + lock_timeout 0.5s + 1s backoff")
	h := cleanHistory()
	h.Fence[1].Committed = at(36)
	require.NotEmpty(t, violationsOf(Check(h), InvFencing))
	h.Faults = append(h.Faults, FaultRecord{Kind: PostgresFast, Target: "postgres", Start: at(31), End: at(34)})
	assert.Empty(t, violationsOf(Check(h), InvFencing), "the fence cannot move while the database restarts")
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
	assert.Equal(t, at(25), h.ableAgain("a1-1", at(25)), "50ms each way keeps requests within 1s")
	h.Faults[len(h.Faults)-1].Detail = "80ms"
	assert.Equal(t, at(25), h.ableAgain("a1-1", at(25)), "80ms each way keeps a register's 6 round trips within 1s")
	h.Faults[len(h.Faults)-1].Detail = "98ms"
	assert.Equal(t, at(29), h.ableAgain("a1-1", at(25)), "98ms each way over a register's 6 round trips does not")
}

func TestSLACountsSilenceFromTheBrakesRelease(t *testing.T) {
	h := cleanHistory()
	h.Events[1].Committed = at(16)
	require.NotEmpty(t, violationsOf(Check(h), InvSLA))
	h.Leaders = append(h.Leaders, LeaderSample{At: at(9), Etcd: "r1", EtcdOK: true, Claiming: []string{"r1"}, Braking: []string{"r1"}})
	slices.SortFunc(h.Leaders, func(a, b LeaderSample) int { return a.At.Compare(b.At) })
	assert.Empty(t, violationsOf(Check(h), InvSLA), "the brake held reaping until 9s")
}

func TestPaddedImpairmentsMerge(t *testing.T) {
	h := cleanHistory()
	h.Faults = append(h.Faults, FaultRecord{Kind: AgentKill, Target: "a1-1", Start: at(21)})
	assert.Equal(t, at(3), h.merged("a1-1")[1].From, "padded, the stop and the kill merge")
}

// The 1,000-fault run of 2026-11-24 02:45 (seed 1124): agent a0-30 was
// stopped from 03:05:11.67 to 19.96, heartbeated on resuming and was
// killed at 20.46; a replica cut from the database at 18.67 (failover
// bound to 20.67) bridged the stop and the kill, so the checker of the
// day dated the silence from the stop and reported the reap at 26.00,
// 6.04 s after the resumed heartbeat, as 10.4 s late. Silence is now
// dated by the agent's own last acknowledged heartbeat, which no fault
// bookkeeping can misplace.
func TestSilenceIsDatedByTheLastAcknowledgedHeartbeat(t *testing.T) {
	h := cleanHistory()
	h.Faults = append(h.Faults,
		FaultRecord{Kind: ReplicaDBCut, Target: "r2", Start: at(19), End: at(24), Detail: "blackhole"},
		FaultRecord{Kind: AgentKill, Target: "a1-1", Start: at(20.5)})
	h.Acks = append(h.Acks, HeartbeatAck{Instance: "a1-1", At: at(20.2), Attempts: []string{"B"}})
	h.Events[1].Committed = at(26.5) // 6.3s after the resumed heartbeat, 24s after the first
	v := Check(h)
	assert.Empty(t, violationsOf(v, InvSLA))
	assert.Empty(t, violationsOf(v, InvNoLiveFailed))
	h.Events[1].Committed = at(29) // 8.8s after it: late
	assert.NotEmpty(t, violationsOf(Check(h), InvSLA))
	h.Events[1].Committed = at(26) // 5.8s after it: early
	assert.NotEmpty(t, violationsOf(Check(h), InvNoLiveFailed))
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
	h.Events[1].Committed = at(13) // 10.5s after B's last heartbeat
	require.NotEmpty(t, violationsOf(Check(h), InvSLA))
	h.Faults = append(h.Faults, FaultRecord{Kind: DatabaseSlow, Target: "postgres", Start: at(8), End: at(11), Detail: "30ms"})
	assert.Empty(t, violationsOf(Check(h), InvSLA), "two sweeps of slow statements stretch the 8.25s bound to 11.85s")
}

// TestSlowSweepStretchArithmetic pins slowSweepStretch: two sweeps, each
// of at most SweepRoundTrips round trips delayed 2d, or of the round trips
// that could begin within the overlap.
func TestSlowSweepStretchArithmetic(t *testing.T) {
	require.Equal(t, 30, SweepRoundTrips, "the figures below assume 30")
	h := cleanHistory()
	slow := func(from, to float64, d string) {
		h.Faults = []FaultRecord{{Kind: DatabaseSlow, Target: "postgres", Start: at(from), End: at(to), Detail: d}}
	}
	slow(8, 11, "30ms")
	assert.Equal(t, 3600*time.Millisecond, h.slowSweepStretch(at(2.5), at(13)), "2 × 30 × 60ms")
	slow(2, 16, "1ms")
	assert.Equal(t, 120*time.Millisecond, h.slowSweepStretch(at(2.5), at(15.5)), "2 × 30 × 2ms")
	slow(10, 10.1, "50ms")
	assert.Equal(t, 400*time.Millisecond, h.slowSweepStretch(at(2.5), at(15.5)), "2 × (100ms/100ms + 1) × 100ms")
	assert.Zero(t, h.slowSweepStretch(at(10.2), at(15.5)), "outside the window")
	h.Faults[0].Kind = AgentLatency
	assert.Zero(t, h.slowSweepStretch(at(2.5), at(15.5)), "only the database's latency")
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

// Invariant 9 alone, case by case: what each broken schedule is called.
func TestSlotsAreExactlyOnePerSlot(t *testing.T) {
	h := cleanHistory()
	res := checkSlots(h)
	assert.Empty(t, res.Violations)
	assert.Equal(t, 3, res.Checked, "the slots at 0, 3 and 6s")
	h.Runs = append(h.Runs, scheduledRun(5, 9, 12.1)) // created after DueBy, before the pause: judged too
	assert.Equal(t, 4, checkSlots(h).Checked)

	h = cleanHistory()
	h.Runs = append(h.Runs, scheduledRun(5, 3, 6.4))
	got := checkSlots(h).Violations
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Detail, "2 scheduled runs of s for one slot (runs 3 and 5)")

	h = cleanHistory()
	h.Runs = slices.Delete(h.Runs, 2, 3)
	got = checkSlots(h).Violations
	require.Len(t, got, 1)
	assert.Equal(t, "slot "+at(3).Format(time.RFC3339), got[0].Subject)
	assert.Contains(t, got[0].Detail, "though the later slot")

	h = cleanHistory()
	h.Runs = h.Runs[:3]
	got = checkSlots(h).Violations
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Detail, "by the end of the fault phase")

	h = cleanHistory()
	h.Schedule = ScheduleRecord{}
	assert.Zero(t, checkSlots(h).Checked, "no schedule, nothing judged")
}

// A skewed agent stamps its gap markers with its own clock: the logs
// check reads them back by its offset, and the skew is measured from the
// log times.
func TestASkewedAgentsMarkersAreReadOnItsClock(t *testing.T) {
	h := cleanHistory()
	h.Agents[0].ClockOffset = 5 * time.Minute
	h.Faults = append(h.Faults, FaultRecord{Kind: AgentPartitionShort, Target: "a0-1", Start: at(1.2), End: at(4.8), Detail: "cut"})
	h.Logs["A"] = AttemptLogs{Received: 3, Markers: []time.Time{at(2).Add(5 * time.Minute)}, First: at(1.01).Add(5 * time.Minute)}
	h.Logs["C"] = AttemptLogs{Received: 2, First: at(12.02).Add(5 * time.Minute)}
	assert.Empty(t, violationsOf(Check(h), InvLogs), "the marker at 2s on the harness's clock")
	seen := Check(h).Skews
	require.Len(t, seen, 1)
	assert.Equal(t, SkewSeen{Instance: "a0-1", Set: 5 * time.Minute, Seen: 5*time.Minute + 20*time.Millisecond, N: 2}, seen[0])

	h.Agents[0].ClockOffset = 0 // read as the harness's clock, the marker is 5 minutes off the partition
	assert.NotEmpty(t, violationsOf(Check(h), InvLogs))
}

func TestAgentSkewsAreDeterministic(t *testing.T) {
	s := AgentSkews(42, 4)
	assert.Equal(t, s, AgentSkews(42, 4))
	assert.NotEqual(t, s, AgentSkews(43, 4))
	assert.Zero(t, s[0])
	assert.Zero(t, s[2])
	assert.GreaterOrEqual(t, s[skewAheadSlot], time.Minute)
	assert.LessOrEqual(t, s[skewBehindSlot], -time.Minute)
}

// A leader cut from etcd is a leader lost like a kill: judged by
// invariant 6 and the fence bound. An etcd fault excuses a failover only
// when it made etcd elect a raft leader.
func TestALeaderCutFromEtcdIsAFailover(t *testing.T) {
	h := cleanHistory()
	h.Faults[1].Kind = LeaderEtcdCut
	v := Check(h)
	require.Len(t, v.Failovers, 1)
	assert.Empty(t, v.Violations())
	h.Leaders[1].Etcd = "r1" // nobody replaced r1
	assert.NotEmpty(t, violationsOf(Check(h), InvLiveness))

	member := FaultRecord{Kind: EtcdMemberKill, Target: "etcd-m2", Start: at(29), End: at(31), Detail: etcdFollower}
	h.Faults = append(h.Faults, member)
	assert.NotEmpty(t, violationsOf(Check(h), InvLiveness), "a follower's kill leaves etcd's leases as they were")
	for _, k := range []FaultKind{EtcdMemberKill, EtcdMemberPartition} {
		h.Faults[len(h.Faults)-1].Kind, h.Faults[len(h.Faults)-1].Detail = k, etcdRaftLeader
		v = Check(h)
		assert.Empty(t, violationsOf(v, InvLiveness), "%s of the raft leader: etcd elected one", k)
		assert.True(t, v.Failovers[0].EtcdDown)
	}
}

// A Patroni failover keeps the database from every agent until the new
// primary takes writes, as a restart does, and the fence's move beside
// it is not timed.
func TestAPatroniFailoverIsADatabaseOutage(t *testing.T) {
	h := cleanHistory()
	h.Faults = append(h.Faults, FaultRecord{Kind: PostgresFailover, Target: "postgres", Start: at(40), End: at(44), Detail: "pg1 -> pg2"})
	assert.Equal(t, at(47), h.ableAgain("a0-1", at(41)), "the new primary's writes + the reconnect bound")
	assert.True(t, h.databaseFaultWithin(at(43), at(45)))
	assert.False(t, h.databaseFaultWithin(at(45), at(46)))
}

package chaos

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cleanProcesses is cleanHistory's process record: r1 and r2 started at
// 0, r1 killed at 30 and started again at 31; agents a0-1 and a1-1
// started at 0, a1-1 exited on its own at 22 and the supervisor started
// a1-2 in its slot at 23; all stopped at 40.
func cleanProcesses() []Process {
	return []Process{
		{Role: RoleReplica, Slot: "r1", Claim: "r1", Instance: "server-r1-1", PID: 100, Started: at(0), Ended: at(30), End: EndKilled},
		{Role: RoleReplica, Slot: "r2", Claim: "r2", Instance: "server-r2-1", PID: 101, Started: at(0), Ended: at(40), End: EndStopped},
		{Role: RoleAgent, Slot: "agent-0", Claim: "agent-0", Instance: "a0-1", PID: 102, Started: at(0), Ended: at(40), End: EndStopped},
		{Role: RoleAgent, Slot: "agent-1", Claim: "agent-1", Instance: "a1-1", PID: 103, Started: at(0), Ended: at(22), End: EndOnItsOwn},
		{Role: RoleReplica, Slot: "r1", Claim: "r1", Instance: "server-r1-2", PID: 104, Started: at(31), Ended: at(40), End: EndStopped},
		{Role: RoleAgent, Slot: "agent-1", Claim: "agent-1", Instance: "a1-2", PID: 105, Started: at(23), Ended: at(40), End: EndStopped, Supervised: true},
	}
}

func TestOneProcessPerSlotHoldsOnACleanRecord(t *testing.T) {
	res := checkProcesses(cleanHistory())
	assert.Empty(t, res.Violations)
	assert.Equal(t, 6, res.Checked)
	assert.Contains(t, res.Notes[0], "supervisor restarts after an exit on its own: 1: agent a1-2 (pid 105)")
}

// TestTwoLiveProcessesOfOneReplicaAreReported is the second 1,000-fault
// run's leak, by hand: two follower_restart faults on r2 overlapped, r2
// was started twice, and the first of the two never exited.
func TestTwoLiveProcessesOfOneReplicaAreReported(t *testing.T) {
	h := cleanHistory()
	h.Processes[1].Ended, h.Processes[1].End = at(5), EndStopped
	h.Processes = append(h.Processes,
		Process{Role: RoleReplica, Slot: "r2", Claim: "r2", Instance: "server-r2-2", PID: 200, Started: at(6)},
		Process{Role: RoleReplica, Slot: "r2", Claim: "r2", Instance: "server-r2-3", PID: 201, Started: at(7), Ended: at(40), End: EndStopped})
	h.Leftovers = []string{"server-r2-2 (pid 200) never exited"}
	got := violationsOf(Check(h), InvOneProcess)
	require.Len(t, got, 2)
	assert.Equal(t, "replica r2", got[0].Subject)
	assert.Equal(t, at(7), got[0].At)
	assert.Contains(t, got[0].Detail, "server-r2-3 (pid 201) started at 03:00:07.000 while server-r2-2 (pid 200")
	assert.Contains(t, got[0].Detail, "never seen to exit")
	assert.Equal(t, "leftover", got[1].Subject)
}

// TestOneProcessPerSlotReportsEachBreach: a second agent under a live
// agent's name (another slot), a second process in an agent's slot under
// a new name, and a task process left alive after the stop.
func TestOneProcessPerSlotReportsEachBreach(t *testing.T) {
	for name, mutate := range map[string]func(h *History){
		"same agent name": func(h *History) {
			h.Processes = append(h.Processes, Process{Role: RoleAgent, Slot: "agent-2", Claim: "agent-0", Instance: "a2-1",
				PID: 300, Started: at(10), Ended: at(40), End: EndStopped})
		},
		"same agent slot, renamed": func(h *History) {
			h.Processes = append(h.Processes, Process{Role: RoleAgent, Slot: "agent-0", Claim: "agent-0-r2", Instance: "a0-2",
				PID: 301, Started: at(10), Ended: at(40), End: EndStopped})
		},
		"a task left behind": func(h *History) { h.Leftovers = []string{"pid 302 with a TMPDIR under /x/tmp/ still alive"} },
	} {
		h := cleanHistory()
		mutate(h)
		got := violationsOf(Check(h), InvOneProcess)
		assert.Len(t, got, 1, name)
	}
}

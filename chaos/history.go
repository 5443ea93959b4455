package chaos

import (
	"slices"
	"time"
)

// History is everything the checker judges, gathered after a run: the
// ground truth the harness recorded outside Vigil (journal, faults, agent
// instances, leader samples) and what Vigil recorded (events, task
// instances, logs, the fence's history). The checker reads nothing else,
// so a hand-made History replays any verdict (docs/reliability.md).
type History struct {
	Seed   int64
	Timing Timing
	// Phases are the fault phases: each one's seed and start.
	Phases []Phase
	// Executions come from the task journal, one per attempt that started.
	Executions []Execution
	// Faults are the injected faults with the wall-clock span of their
	// effect (Start when it was applied, End when it was reverted).
	Faults []FaultRecord
	// Agents are the agent processes the harness ran, by instance.
	Agents []AgentInstance
	// Events, TIs and Runs are Vigil's rows at the end of the run.
	Events []Event
	TIs    []TaskInstance
	Runs   []RunRow
	// Logs is per attempt id what Vigil stored of its log.
	Logs map[string]AttemptLogs
	// Fence is the fence's history (migration-independent: the harness's
	// trigger on leader_fence), oldest first.
	Fence []FenceChange
	// LeaderWrites are the transactions leader sessions wrote in, one
	// each (the harness's chaos_leader_writes triggers), oldest first.
	LeaderWrites []LeaderWrite
	// Leaders are the samples of every replica's vigil_leader gauge and of
	// etcd's election, oldest first.
	Leaders []LeaderSample
	// Graces are the agent-lost grace restarts each replica logged while
	// it led (its stall detector: the database was unreachable or the
	// process paused), which make stuck work eligible later by design.
	Graces []GraceRestart
	// Schedule is the workload's scheduled DAG and the window its slots
	// are judged in (invariant 9).
	Schedule ScheduleRecord
	// RunBound is the worst fault-free duration of each DAG's run.
	RunBound map[string]time.Duration
	// Timeouts is the execution_timeout of each workload task, by task id.
	Timeouts map[string]time.Duration
	// Processes are every vigil process the harness started, oldest
	// first, with how each ended (recorded after the cluster was stopped).
	Processes []Process
	// Leftovers are the processes the harness started (directly or as an
	// agent's tasks) still alive after it stopped the cluster.
	Leftovers []string
	// Acks are the heartbeats the control plane acknowledged, from every
	// agent's log (agent.HeartbeatAckMsg): the evidence a reaper must
	// respect (invariant 1).
	Acks []HeartbeatAck
	// End is when the collection happened; an execution with neither an
	// end record nor an observed death was alive then.
	End time.Time
}

// HeartbeatAck is one acknowledged heartbeat: the database clock of the
// transaction that refreshed Attempts, as the agent's reply carried it.
type HeartbeatAck struct {
	Instance string
	At       time.Time
	Attempts []string
}

// acksByAttempt is every acknowledged heartbeat by the attempt ids it
// covered, oldest first.
func (h *History) acksByAttempt() map[string][]HeartbeatAck {
	out := map[string][]HeartbeatAck{}
	for _, a := range h.Acks {
		for _, id := range a.Attempts {
			out[id] = append(out[id], a)
		}
	}
	for _, list := range out {
		slices.SortFunc(list, func(a, b HeartbeatAck) int { return a.At.Compare(b.At) })
	}
	return out
}

// Phase is one stretch of faults drawn from one seed.
type Phase struct {
	Seed   int64
	Faults int
	From   time.Time
}

// seedAt is the seed of the phase running at t.
func (h *History) seedAt(t time.Time) int64 {
	seed := h.Seed
	for _, p := range h.Phases {
		if !p.From.After(t) {
			seed = p.Seed
		}
	}
	return seed
}

// Timing is the chaos cluster's timing configuration (vigil server flags).
type Timing struct {
	HeartbeatInterval time.Duration // --heartbeat-interval
	AgentLost         time.Duration // --agent-lost-threshold
	ElectionTTL       time.Duration // --election-ttl
	Sweep             time.Duration // --sweep-interval
	Tick              time.Duration // --tick-interval
	KillGrace         time.Duration // agent --kill-grace
}

// FenceBound is how long after the leader's loss the fence may take to
// move to its successor: the election's bound (TTL + 2 s, invariant 6),
// then one lock_timeout that AcquireFence may spend behind an older
// term's transaction (store.DefaultLeaderTimeouts: TTL/4, at least
// 500 ms) and the longest backoff before it tries again (1 s,
// leader/fence.go). A frozen leader's session is gone by then: its
// idle-in-transaction timeout is shorter than the TTL.
func (t Timing) FenceBound() time.Duration {
	return t.ElectionTTL + 2*time.Second + max(t.ElectionTTL/4, 500*time.Millisecond) + time.Second
}

// ReconnectBound is how long an agent that became able to reach the
// control plane may take before a request lands: a request timeout plus
// one backoff step (both at most one heartbeat interval, agent/backoff.go)
// plus one interval until the next heartbeat.
func (t Timing) ReconnectBound() time.Duration { return 3 * t.HeartbeatInterval }

// Execution is one attempt as the task journal saw it.
type Execution struct {
	AttemptID string
	TIID      int64
	RunID     int64
	TaskID    string
	Try       int
	PID       int
	Instance  string    // the agent instance that ran it (its private TMPDIR)
	Start     time.Time // start record
	End       time.Time // end record; zero when the process was killed
	Gone      time.Time // when the harness saw the pid vanish; zero if never
	Exit      int       // exit code from the end record
	Printed   int       // log lines printed, from the end record
}

// HasEnd reports whether the task wrote its end record.
func (e Execution) HasEnd() bool { return !e.End.IsZero() }

// Finish is when the execution stopped running: its end record, else the
// observed death, else the collection time.
func (e Execution) Finish(end time.Time) time.Time {
	switch {
	case e.HasEnd():
		return e.End
	case !e.Gone.IsZero():
		return e.Gone
	}
	return end
}

// FaultRecord is one injected fault.
type FaultRecord struct {
	Kind   FaultKind
	Target string // an agent instance, a replica id, "postgres" or "etcd"
	Start  time.Time
	End    time.Time
	Detail string
	// Lag is how far behind its plan the fault started: its lane was busy
	// with an earlier fault that outran its hold, or a leader fault waited
	// for a leader (runLane).
	Lag time.Duration
}

// AgentInstance is one `vigil agent` process the harness started.
type AgentInstance struct {
	Instance string // unique: the process's private TMPDIR name
	Name     string // --name (a restart may reuse it)
	Started  time.Time
	Ended    time.Time // zero while running at collection
	Killed   bool      // ended by kill -9
	// ClockOffset is how far its wall clock was off (the test hook
	// agent.EnvTestClockOffset): the times it stamped on its
	// log lines and gap markers are that far from the harness's.
	ClockOffset time.Duration
}

// Event is one row of the events table.
type Event struct {
	ID        int64
	RunID     int64
	TIID      int64
	Kind      string
	AttemptID string
	Try       int
	Epoch     int64 // 0: not a leader write
	Created   time.Time
	Committed time.Time // pg_xact_commit_timestamp of the inserting transaction
}

// TaskInstance is one row of task_instances.
type TaskInstance struct {
	ID        int64
	RunID     int64
	TaskID    string
	State     string
	Reason    string
	AttemptID string
	Try       int
}

// RunRow is one row of runs.
type RunRow struct {
	ID      int64
	DAG     string
	State   string
	Created time.Time
	Ended   time.Time // zero while not terminal
	// Type is its run_type (manual, scheduled, backfill); LogicalDate its
	// slot, zero for a manual run.
	Type        string
	LogicalDate time.Time
}

// AttemptLogs is what Vigil stored of one attempt's log.
type AttemptLogs struct {
	Received int         // stdout and stderr lines
	Dropped  int         // the sum of the "(N dropped)" counts of its gap markers
	Markers  []time.Time // the agent timestamps of its gap markers
	// First is the agent timestamp of its first stdout or stderr line.
	First time.Time
	// Odd holds stored stdout/stderr lines that are not the task's own
	// "line i of n" lines (at most a few), to explain a mismatch.
	Odd []string
}

// GraceRestart is one "agent-lost grace restarted" log line of a replica.
type GraceRestart struct {
	Replica string
	At      time.Time // its grace_start (database clock)
}

// LeaderWrite is one committed transaction in which a leader session
// wrote to a table of Vigil's other than the fence.
type LeaderWrite struct {
	TxID      int64
	Epoch     int64 // the fence check's epoch; 0: written without a fence check
	Table     string
	Committed time.Time
}

// FenceChange is one committed move of the leader fence.
type FenceChange struct {
	Epoch     int64
	Holder    string
	Committed time.Time
}

// LeaderSample is one observation of who leads.
type LeaderSample struct {
	At time.Time
	// Etcd is the replica holding etcd's election key ("" for none or
	// when etcd did not answer, then EtcdOK is false).
	Etcd   string
	EtcdOK bool
	// Claiming lists the replicas whose /metrics said vigil_leader 1.
	Claiming []string
	// Braking lists those that said vigil_mass_silence_brake 1: the
	// brake held agent-lost reaping (docs/design.md §6).
	Braking []string
}

// Process is one `vigil server` or `vigil agent` process the harness
// started, for the one-process-per-slot check (check_procs.go).
type Process struct {
	Role ProcRole
	// Slot is the position it fills: a replica id (r2) or an agent slot
	// (agent-1); the harness keeps one process per slot.
	Slot string
	// Claim is the identity it gives the control plane: its --replica-id
	// or its agent --name.
	Claim    string
	Instance string // its log name: server-r2-3, a1-4
	PID      int
	Started  time.Time
	Ended    time.Time // when the harness saw it exit; zero if it never did
	End      ProcEnd   // how it ended; "" if it never did
	// Supervised: started by the supervisor after its slot's previous
	// process exited on its own, not by a fault or at start-up.
	Supervised bool
}

// ProcRole is what a harness process is.
type ProcRole string

// The roles of harness processes.
const (
	RoleReplica ProcRole = "replica"
	RoleAgent   ProcRole = "agent"
)

// ProcEnd is how a harness process ended.
type ProcEnd string

// The ways a harness process ends.
const (
	EndStopped  ProcEnd = "stopped by the harness"         // SIGTERM: follower_restart, the final stop
	EndKilled   ProcEnd = "killed by the harness"          // kill -9: leader_kill, agent_kill
	EndReplaced ProcEnd = "killed: its slot started again" // still alive when its slot was started again
	EndOnItsOwn ProcEnd = "exited on its own"              // the supervisor restarts its slot
)

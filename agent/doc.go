// Package agent is the Vigil agent: it registers with the control plane,
// long-polls for task instances (TIs), runs each as a subprocess in its own
// process group, heartbeats every in-flight attempt in one request, ships
// the captured output, and reports completions (docs/design.md §4).
//
// # Protocol
//
// Register carries name, tags, capacity and the in-flight attempts. The
// claim loop long-polls with Slots = free slots. After a process starts
// (or fails to start) the runner makes sure a heartbeat with Started=true
// has gone out before the completion, so the server records started_at;
// concurrent starts share one heartbeat, which lists only the attempts
// started since the previous one (the periodic heartbeat lists them
// all). Before a completion the runner also waits, bounded, for the
// attempt's output to be shipped. A 409
// stale_attempt drops the completion (and signals any survivors of the
// process group); a stop order in a heartbeat or register reply kills the
// group and suppresses the completion. A 404 not_found means the server
// forgot the agent: it registers again, without a gap marker. A 401, 403
// or other 4xx fails only that request and is logged; the claim loop backs
// off so it never spins.
//
// # Outages
//
// When the control plane is unreachable (a network error or a 5xx) the agent
// keeps its tasks running and buffers what it would have sent (docs/design.md §4,
// KiCI agent reconnection):
//   - completions go into a ring of Config.EventBufferSize events; periodic
//     heartbeats are only counted, because the one heartbeat sent after
//     reconnecting carries the current state and supersedes them, and they
//     must not crowd completions out of the ring;
//   - log lines go into a ring of Config.LogBufferSize lines.
//
// While connected, the log ring never drops: when it is full the task's
// output is not read until the shipper has taken lines from it, so a task
// printing faster than the control plane stores blocks on its writes
// (backpressure) instead of losing lines. Disconnected, the agent does not
// hold tasks back, so the ring drops its oldest lines, each counted.
//
// Both rings drop their oldest entry when full and count the drops. The
// agent reconnects with exponential backoff (1 s base, ×1.5, ±20% jitter,
// 60 s cap), moving to the next of Config.Servers after every failed try and
// sleeping once it has tried each server in turn. On success it re-registers
// with its in-flight attempts (running ones and those with a buffered
// completion), kills those the reply lists in Terminate, and replays in this
// order: the log lines captured before the outage began (they sort before
// its markers); one gap-marker line per attempt that was live during the outage or
// has queued lines; one heartbeat with the current state (it also marks the
// attempts with buffered completions as started); the buffered completions
// oldest first; then the buffered log lines with their original timestamps
// and sequence numbers. Only then does claiming resume.
//
// # Sequence numbers and the gap marker
//
// A log line gets its Seq (from 1, per attempt) when it is captured, not
// when it is shipped, so replays are idempotent and keep their order. When
// an outage begins (the first failed request), each live attempt reserves
// its next Seq for its gap marker; an attempt claimed during the outage
// reserves Seq 1; a finished attempt whose lines are still queued reserves
// the Seq after its last line. Lines captured before the agent noticed the
// outage therefore sort before the marker and lines captured during it sort
// after, so logs ordered by (try_number, seq) show the marker where the gap
// began. The marker's timestamp is the outage start for the same reason.
// Its text is only known on reconnect, so it is sent then, ahead of the
// data it describes. Its counts are agent-wide totals for the outage:
// events are the heartbeats that fell due plus the buffered completions,
// log lines are those queued for replay, and "dropped" sums what fell out
// of either ring since the outage began, or since the log batch whose
// failure revealed it was taken, whichever is earlier. Each marker also
// carries, as its Dropped field, the lines of its own attempt that fell
// out of the ring and no earlier marker counted, so that per attempt
// lines stored + the markers' Dropped = lines printed, exactly.
//
// # Log delivery
//
// Log lines are delivered at least once and stored once: the server
// ignores a line whose (attempt, Seq) it already has. A line taken for a
// batch leaves the ring and is held, never dropped, until the server
// acknowledges it (logQueue), and so are the lines a gap marker announces.
// A batch whose reply is lost is therefore sent again rather than counted
// as dropped, and lines printed during a replay cannot push announced ones
// out unseen: stored lines + the markers' dropped counts = lines printed.
//
// # Process groups and the supervisor
//
// Every task runs under the agent's supervisor (package agent/supervisor:
// vigil-supervise, or `vigil __supervise`; Config.SupervisorPath), one
// long-lived process the agent starts at its first task and again after it
// exits, and sends each task to over a Unix socket
// (adr/0035-one-supervisor-per-agent.md). It starts each command in its
// own process group and reports its pid and its exact wait status (exit
// code or signal), or why it could not start. Killing a task (execution
// timeout, a stop order from the control plane, the drain deadline)
// signals the whole group: SIGTERM, then SIGKILL after Config.KillGrace.
// When the leader exits on its own, the supervisor kills whatever it left
// in its group the same way before it reports the status, so a task cannot
// leak processes; the outcome is still the leader's exit status. When the
// agent dies, even by SIGKILL, the supervisor sees its socket's end of
// file (backed by a poll of getppid) and kills every task's group the same
// way, so a crashed agent's tasks never run beside their retries. When the
// supervisor dies first, the agent kills each running task's group itself
// before it reports the attempt failed with the supervisor's signal.
// Waiting never hangs on a descendant that keeps stdout open: the agent
// stops reading its pipes a bounded idle time after the exit (outPipe).
//
// Zombies count as group members for kill(2). Where PID 1 does not reap
// orphans (some containers), a killed group can look alive until its grace
// ends; the SIGKILL then sent is harmless.
package agent

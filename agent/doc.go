// Package agent is the Vigil agent: it registers with the control plane,
// long-polls for task instances (TIs), runs each as a subprocess in its own
// process group, heartbeats every in-flight attempt in one request, ships
// the captured output, and reports completions (DESIGN §4).
//
// # Outages
//
// When the control plane is unreachable (a network error or a 5xx) the agent
// keeps its tasks running and buffers what it would have sent (DESIGN §4,
// KiCI agent reconnection):
//   - completions go into a ring of Config.EventBufferSize events; periodic
//     heartbeats are only counted, because the heartbeat sent after
//     reconnecting carries the current state and supersedes them;
//   - log lines go into a ring of Config.LogBufferSize lines.
//
// Both rings drop their oldest entry when full and count the drops. The
// agent reconnects with exponential backoff (1 s base, ×1.5, ±20% jitter,
// 60 s cap), moving to the next of Config.Servers after every failed try and
// sleeping once it has tried each server in turn. On success it re-registers
// with its in-flight attempts, kills those the reply lists in Terminate, and
// replays in this order: one gap-marker line per attempt that was live during
// the outage, then the buffered completions oldest first, then the buffered
// log lines with their original timestamps and sequence numbers.
//
// # Sequence numbers and the gap marker
//
// A log line gets its Seq (from 1, per attempt) when it is captured, not
// when it is shipped, so replays are idempotent and keep their order. When
// an outage begins, each live attempt reserves the next Seq for its gap
// marker, and an attempt claimed during the outage reserves Seq 1. Lines
// captured before the agent noticed the outage therefore sort before the
// marker and lines captured during it sort after, so logs ordered by
// (try_number, seq) show the marker where the gap began. The marker carries
// the outage start as its timestamp for the same reason. Its text is only
// known on reconnect, so it is sent then, before everything it describes.
// Its counts are agent-wide totals for the outage; "dropped" sums the log
// lines and events that fell out of either ring.
//
// # Process groups
//
// Every task runs with Setpgid, so killing it (execution timeout, a stop
// order from the control plane, the drain deadline) signals the whole group:
// SIGTERM, then SIGKILL after Config.KillGrace. Waiting for a task never
// hangs on a descendant that keeps stdout open: os/exec's WaitDelay closes
// the pipes shortly after the leader exits.
package agent

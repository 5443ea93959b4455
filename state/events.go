package state

// EventKind is the kind of one entry of a run's timeline (the events
// table). The store writes them; the API and the console show them as is.
type EventKind string

// Event kinds of a task instance's life, each written with the
// transition it records.
const (
	EventTIClaimed        EventKind = "ti_claimed"         // an agent claimed it (queued -> running)
	EventTIStarted        EventKind = "ti_started"         // its agent started the process
	EventTISuccess        EventKind = "ti_success"         // the try succeeded
	EventTIFailed         EventKind = "ti_failed"          // failed with no retries left, or orphaned
	EventTIUpForRetry     EventKind = "ti_up_for_retry"    // failed with a retry left
	EventTIUpstreamFailed EventKind = "ti_upstream_failed" // an upstream failed or was cancelled
	EventTISkipped        EventKind = "ti_skipped"         // its trigger rule can never be met, or it exited with its skip_exit_code
	EventTICancelled      EventKind = "ti_cancelled"       // its run was cancelled or timed out
	EventTIReopened       EventKind = "ti_reopened"        // back to none after its upstream's late success
	EventTICleared        EventKind = "ti_cleared"         // back to none by an operator's clear: runs again as a new try
	EventTIMarked         EventKind = "ti_marked"          // set to success or failed by an operator (reason marked)
)

// Event kinds of a run's life.
const (
	EventRunQueued    EventKind = "run_queued"    // triggered
	EventRunStarted   EventKind = "run_started"   // queued -> running
	EventRunSuccess   EventKind = "run_success"   // finalized, every TI done
	EventRunFailed    EventKind = "run_failed"    // finalized with a failed TI
	EventRunCancelled EventKind = "run_cancelled" // by an operator or its run_timeout
	EventRunReopened  EventKind = "run_reopened"  // an ended run back to running after a clear or mark
	EventSLAMissed    EventKind = "sla_missed"    // not finished by its SLA deadline (docs/notifications.md)
)

// Event kinds of schedules and backfills (docs/schedules.md).
const (
	EventSlotCreated     EventKind = "slot_created"     // a scheduled run created for its slot
	EventSlotsSkipped    EventKind = "slots_skipped"    // catchup off: missed slots skipped
	EventSlotHeld        EventKind = "slot_held"        // max_active_runs held the next slot
	EventBackfillCreated EventKind = "backfill_created" // a backfill run created
)

// Event kinds of recovery (docs/design.md §6, §7); each is also the
// decision label counted in vigil_scheduler_decisions_total.
const (
	EventAgentLost         EventKind = "agent_lost"               // running TI's agent went silent
	EventAgentLostRequeued EventKind = "agent_lost_requeued"      // same, never started: requeued
	EventDispatchLost      EventKind = "dispatch_lost"            // no live agent could take it
	EventExecutionTimeout  EventKind = "execution_timeout"        // the backstop ended it
	EventOrphanReaped      EventKind = "orphan_reaped"            // a run with nothing left to do failed
	EventOrphanFinalized   EventKind = "orphan_finalized"         // a run with every TI terminal finalized
	EventLateAccepted      EventKind = "late_completion_accepted" // a reaped attempt's success accepted
	EventLateRecorded      EventKind = "late_completion_recorded" // recorded only: the run had ended
)

// EventKinds lists every event kind.
func EventKinds() []EventKind {
	return []EventKind{EventTIClaimed, EventTIStarted, EventTISuccess, EventTIFailed, EventTIUpForRetry,
		EventTIUpstreamFailed, EventTISkipped, EventTICancelled, EventTIReopened, EventTICleared, EventTIMarked,
		EventRunQueued, EventRunStarted, EventRunSuccess, EventRunFailed, EventRunCancelled, EventRunReopened, EventSLAMissed,
		EventSlotCreated, EventSlotsSkipped, EventSlotHeld, EventBackfillCreated,
		EventAgentLost, EventAgentLostRequeued, EventDispatchLost, EventExecutionTimeout,
		EventOrphanReaped, EventOrphanFinalized, EventLateAccepted, EventLateRecorded}
}

package protocol

// ClearRequest is the body of POST /v1/runs/{run_id}/clear (docs/rerun.md).
// An empty body clears every task instance of the run that ended failed,
// upstream_failed or skipped.
type ClearRequest struct {
	// TaskIDs names the tasks to clear instead of the default selection.
	TaskIDs []string `json:"task_ids,omitempty"`
	// Downstream and Upstream add the named (or default) tasks'
	// transitive dependents and dependencies.
	Downstream bool `json:"downstream,omitempty"`
	Upstream   bool `json:"upstream,omitempty"`
	// OnlyFailed keeps, of the selection, the task instances that ended
	// failed or upstream_failed.
	OnlyFailed bool `json:"only_failed,omitempty"`
	// DryRun lists what would be cleared and changes nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Reason is the operator's why, at most MaxReasonLen bytes; it goes
	// into each cleared task instance's event.
	Reason string `json:"reason,omitempty"`
}

// MaxReasonLen bounds ClearRequest.Reason and MarkRequest.Reason, in
// bytes.
const MaxReasonLen = 1024

// ClearedTI is one task instance a clear returned to none, as it was
// before: State is the state it left, TryNumber its last try (the next
// runs as TryNumber+1). Rederived is true for a task instance the
// scheduler had ended by its trigger rule (upstream_failed, or skipped by
// the rule), cleared because the clear of a task it depends on may change
// that.
type ClearedTI struct {
	TaskID    string `json:"task_id"`
	State     string `json:"state"`
	TryNumber int    `json:"try_number"`
	Rederived bool   `json:"rederived,omitempty"`
}

// ClearResponse is the reply of POST /v1/runs/{run_id}/clear: the run
// after the clear (back to running when anything was cleared) and the
// task instances cleared, or, with DryRun, those a clear would clear.
type ClearResponse struct {
	Run     Run         `json:"run"`
	DryRun  bool        `json:"dry_run,omitempty"`
	Cleared []ClearedTI `json:"cleared"`
}

// MarkRequest is the body of POST /v1/runs/{run_id}/tasks/{task_id}/mark
// (docs/rerun.md).
type MarkRequest struct {
	// State is "success" or "failed".
	State string `json:"state"`
	// Downstream marks the task's transitive dependents too.
	Downstream bool `json:"downstream,omitempty"`
	// Reason is the operator's why, at most MaxReasonLen bytes.
	Reason string `json:"reason,omitempty"`
}

// MarkedTI is one task instance a mark set, with the state it left.
type MarkedTI struct {
	TaskID string `json:"task_id"`
	State  string `json:"state"`
}

// MarkResponse is the reply of a mark: the run after it, the task
// instances it set, and the dependents the scheduler had ended by their
// trigger rule (upstream_failed, or skipped by the rule) that the mark may
// decide otherwise, returned to none to be judged again.
type MarkResponse struct {
	Run      Run        `json:"run"`
	Marked   []MarkedTI `json:"marked"`
	Reopened []string   `json:"reopened"`
}

package protocol

import "time"

// Bounds of GET /v1/dags/{dag_id}/grid?limit=N (docs/api.md).
const (
	// GridRunsDefault is the runs of a grid when the request has no limit.
	GridRunsDefault = 25
	// GridRunsMax is the largest limit the endpoint accepts.
	GridRunsMax = 100
	// GridCellsMax bounds the TIs of one reply: the limit is lowered to
	// GridCellsMax divided by the DAG's tasks, so a wide DAG shows fewer
	// runs (at least one).
	GridCellsMax = 10000
)

// DAGGrid is GET /v1/dags/{dag_id}/grid: the DAG's last runs × its tasks,
// for the console's grid and run-duration chart.
type DAGGrid struct {
	DAGID string `json:"dag_id"`
	// Tasks are the task ids of the DAG's current spec in declaration
	// order; a run made from an older spec may have TIs of other tasks.
	Tasks []string `json:"tasks"`
	// Limit is the runs asked for after the GridCellsMax bound.
	Limit int `json:"limit"`
	// Runs are the DAG's last Limit runs (or fewer), newest first.
	Runs []GridRun `json:"runs"`
	// Truncated: older runs within Limit were left out because their TIs
	// (from a wider spec) passed GridCellsMax.
	Truncated bool `json:"truncated"`
}

// GridRun is one run of a DAGGrid with the state and try of each TI.
type GridRun struct {
	ID          int64      `json:"id"`
	State       string     `json:"state"`
	RunType     string     `json:"run_type"`
	QueuedAt    time.Time  `json:"queued_at"`
	StartDate   *time.Time `json:"start_date,omitempty"`
	EndDate     *time.Time `json:"end_date,omitempty"`
	LogicalDate *time.Time `json:"logical_date,omitempty"`
	// TaskInstances are the run's TIs in declaration order.
	TaskInstances []GridCell `json:"task_instances"`
}

// GridCell is one TI of a GridRun: TryNumber is 0 before its first claim.
type GridCell struct {
	TaskID    string `json:"task_id"`
	State     string `json:"state"`
	TryNumber int    `json:"try_number"`
}

package protocol

// TIOutputs is one task instance's outputs (docs/task-environment.md,
// "Outputs"): what try TryNumber, the try that made it success, wrote to
// its VIGIL_OUTPUT file, by key; Bytes is the size of its keys and values.
type TIOutputs struct {
	TIID      int64             `json:"ti_id"`
	TaskID    string            `json:"task_id"`
	TryNumber int               `json:"try_number"`
	Outputs   map[string]string `json:"outputs"`
	Bytes     int               `json:"bytes"`
}

// OutputList is a page of GET /v1/runs/{run_id}/outputs: the outputs of
// the run's successful task instances that have any, in the DAG's task
// order, at most about 4 MiB and 1000 task instances a page. NextCursor,
// when not null, is the after of the next page (a task's place in the
// DAG); null on the last page.
type OutputList struct {
	RunID      int64       `json:"run_id"`
	Outputs    []TIOutputs `json:"outputs"`
	NextCursor *int        `json:"next_cursor"`
}

package protocol

import "time"

// Pool is one task pool (GET /v1/pools, PUT /v1/pools/{name};
// docs/pools.md): its slots, the TIs that occupy one (claimed or
// running) and the queued TIs that wait for one.
type Pool struct {
	Name  string `json:"name"`
	Slots int    `json:"slots"`
	// Running may exceed Slots only after the pool was shrunk, until its
	// TIs drain.
	Running int `json:"running"`
	// Queued is counted up to 10,000; QueuedCapped then says there may
	// be more.
	Queued       int       `json:"queued"`
	QueuedCapped bool      `json:"queued_capped"`
	Description  string    `json:"description"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// PoolList is the reply of GET /v1/pools, by name (at most 1,000).
type PoolList struct {
	Pools []Pool `json:"pools"`
}

// SetPoolRequest is the body of PUT /v1/pools/{name}: the slots (0 to
// 1,000,000) and, when present, a new description (at most 1,000 bytes).
type SetPoolRequest struct {
	Slots       *int    `json:"slots"`
	Description *string `json:"description,omitempty"`
}

// SetPoolResponse is the reply of PUT /v1/pools/{name}: the pool as now
// stored, and whether the name is new.
type SetPoolResponse struct {
	Pool
	Created bool `json:"created"`
}

// DeleteDAGResponse is the reply of DELETE /v1/dags/{dag_id}.
type DeleteDAGResponse struct {
	DAGID   string `json:"dag_id"`
	Deleted bool   `json:"deleted"`
}

package protocol

import "time"

// The audit log (GET /v1/audit, admin; docs/security.md "The audit log").
const (
	// AuditPageDefault is a page's size when ?limit is absent.
	AuditPageDefault = 100
	// AuditPageMax bounds ?limit.
	AuditPageMax = 1000
)

// AuditRecord is one row of the audit log: a state-changing API call,
// allowed or refused, or a fence reset. Actor is an identity's name, or
// "anonymous" for a caller that proved none (Auth then says which kind of
// credential failed, if any); never a token. Status is the HTTP status of
// a call recorded after its reply, and absent for one recorded in the
// transaction of its change (Result "ok").
type AuditRecord struct {
	ID        int64     `json:"id"`
	At        time.Time `json:"at"`
	Actor     string    `json:"actor"`
	Role      string    `json:"role,omitempty"`
	Auth      string    `json:"auth,omitempty"` // bearer | session | database
	Method    string    `json:"method,omitempty"`
	Route     string    `json:"route"`
	Target    string    `json:"target"`
	RequestID string    `json:"request_id,omitempty"`
	Client    string    `json:"client,omitempty"`
	Result    string    `json:"result"` // ok | refused | failed
	Status    int       `json:"status,omitempty"`
	Message   string    `json:"message,omitempty"`
}

// AuditList is a page of GET /v1/audit, newest first; NextCursor is the
// ?before of the next page, null on the last.
type AuditList struct {
	Records    []AuditRecord `json:"records"`
	NextCursor *int64        `json:"next_cursor"`
}

// Fence is the leader fence row (docs/operations.md "The leader fence").
type Fence struct {
	Name       string     `json:"name"`
	Generation int64      `json:"generation"`
	Domain     string     `json:"domain,omitempty"`
	Revision   int64      `json:"revision"`
	Epoch      int64      `json:"epoch"`
	Holder     string     `json:"holder,omitempty"`
	AcquiredAt *time.Time `json:"acquired_at,omitempty"`
}

// FenceResetRequest is the body of POST /v1/fence/reset (admin).
type FenceResetRequest struct {
	// Reason says why, for the audit; required, at most MaxReasonLen.
	Reason string `json:"reason"`
}

// FenceResetResponse is the fence before and after a reset, and who reset
// it.
type FenceResetResponse struct {
	Before Fence  `json:"before"`
	After  Fence  `json:"after"`
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

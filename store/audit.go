package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// The audit log (docs/security.md "The audit log", adr/0034): one row per
// state-changing API call, allowed or refused, and per fence reset.
//
// The API puts the call's AuditRecord in the request's context
// (WithAudit). A store function that changes what an operator asked for
// opens its transaction with writeTx, which inserts the record in that
// same transaction before it commits: the row exists if and only if the
// change does. A call that changed nothing (refused, failed, or a change
// outside the database) gets its row from AppendAudit on its own.

// Bounds of an audit row's fields, in bytes: a longer value is cut at a
// rune boundary and ends with "…". They bound a row to about 1.5 KiB,
// whatever a caller sends.
const (
	auditMaxShort   = 64  // auth, method, request id, client address, role
	auditMaxName    = 128 // actor, route
	auditMaxTarget  = 256
	auditMaxMessage = 512
)

// Audit results (audit_log.result).
const (
	// AuditOK: the call was allowed and succeeded.
	AuditOK = "ok"
	// AuditRefused: authentication or authorization refused it (401, 403).
	AuditRefused = "refused"
	// AuditFailed: allowed, but it changed nothing (400, 404, 409, 5xx).
	AuditFailed = "failed"
)

// AuditRecord is one audit_log row: who made a call, how, on what and
// with which result. Actor is an identity's name, or for a caller that
// proved none "anonymous" or the kind of credential that failed; never a
// token.
type AuditRecord struct {
	ID        int64     `json:"id"`
	At        time.Time `json:"at"` // the database clock; set by the insert
	Actor     string    `json:"actor"`
	Role      string    `json:"role,omitempty"`
	Auth      string    `json:"auth,omitempty"` // bearer, session, database; "" when none
	Method    string    `json:"method,omitempty"`
	Route     string    `json:"route"`  // the route's pattern, or the CLI command
	Target    string    `json:"target"` // what it acted on: the path below /v1/
	RequestID string    `json:"request_id,omitempty"`
	Client    string    `json:"client,omitempty"` // the client's address
	Result    string    `json:"result"`           // AuditOK | AuditRefused | AuditFailed
	Status    int       `json:"status,omitempty"` // the HTTP status; 0 when written with the change, before the reply
	Message   string    `json:"message,omitempty"`

	written bool // set once writeTx committed the row with a change
}

// Written reports whether a change's transaction committed the record
// (writeTx); if not, the caller appends it on its own (AppendAudit).
func (a *AuditRecord) Written() bool { return a.written }

// bounded returns the record with every field cut to its bound.
func (a *AuditRecord) bounded() AuditRecord {
	b := *a
	b.Actor, b.Route = cut(b.Actor, auditMaxName), cut(b.Route, auditMaxName)
	b.Role, b.Auth, b.Method = cut(b.Role, auditMaxShort), cut(b.Auth, auditMaxShort), cut(b.Method, auditMaxShort)
	b.RequestID, b.Client = cut(b.RequestID, auditMaxShort), cut(b.Client, auditMaxShort)
	b.Target, b.Message = cut(b.Target, auditMaxTarget), cut(b.Message, auditMaxMessage)
	if b.Actor == "" {
		b.Actor = "anonymous"
	}
	if b.Result == "" {
		b.Result = AuditOK
	}
	return b
}

// cut shortens s to at most n bytes of valid UTF-8, ending with "…" when
// it cut.
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

type auditKey struct{}

// WithAudit returns ctx carrying rec, the audit record of the API call
// ctx serves: writeTx inserts it with the call's change, and ActorOf
// reads its actor for the events the change writes.
func WithAudit(ctx context.Context, rec *AuditRecord) context.Context {
	return context.WithValue(ctx, auditKey{}, rec)
}

// AuditFrom is the audit record ctx carries (WithAudit), nil for none:
// the API fills in the caller once it is known.
func AuditFrom(ctx context.Context) *AuditRecord {
	rec, _ := ctx.Value(auditKey{}).(*AuditRecord)
	return rec
}

// ActorOf is the actor of the API call ctx serves (WithAudit), for the
// events a change writes ("cancelled by alice"); "" when ctx serves none
// (the scheduler's own work).
func ActorOf(ctx context.Context) string {
	if rec := AuditFrom(ctx); rec != nil {
		return rec.Actor
	}
	return ""
}

// byActor is " by <actor>" for ctx's actor, "" without one: the suffix of
// an event's message.
func byActor(ctx context.Context) string {
	if a := ActorOf(ctx); a != "" {
		return " by " + a
	}
	return ""
}

// writeTx runs fn in a transaction that also inserts ctx's audit record,
// if it has one not yet written, just before it commits: every store
// function that makes a change an operator asked for opens its
// transaction here, so its audit row commits or rolls back with it.
func (s *Store) writeTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	rec := AuditFrom(ctx)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if rec == nil || rec.written {
			return nil
		}
		return insertAudit(ctx, tx, rec)
	})
	if err == nil && rec != nil {
		rec.written = true
	}
	return err
}

// insertAudit inserts rec, bounded, and fills its ID and At.
func insertAudit(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, rec *AuditRecord) error {
	b := rec.bounded()
	var status *int
	if b.Status != 0 {
		status = &b.Status
	}
	err := q.QueryRow(ctx, `
		INSERT INTO audit_log (actor, role, auth, method, route, target, request_id, client, result, status, message)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id, at`,
		b.Actor, b.Role, b.Auth, b.Method, b.Route, b.Target, b.RequestID, b.Client, b.Result, status, b.Message).
		Scan(&rec.ID, &rec.At)
	if err != nil {
		return fmt.Errorf("record audit: %w", err)
	}
	return nil
}

// AppendAudit inserts rec on its own: a call that was refused, failed or
// changed nothing in the database.
func (s *Store) AppendAudit(ctx context.Context, rec *AuditRecord) error {
	return insertAudit(ctx, s.pool, rec)
}

// AuditPageMax bounds one page of ListAudit.
const AuditPageMax = 1000

// AuditFilter selects audit rows: each set field must match. Target
// matches as a prefix ("runs/42" finds "runs/42/cancel").
type AuditFilter struct {
	Actor  string
	Target string
	Since  time.Time // rows at or after it; zero: all
	// SinceAgo, when set, keeps rows at or after the database clock's now
	// minus it.
	SinceAgo time.Duration
	Before   int64 // rows with an id below it (the page cursor); 0: from the newest
	Limit    int   // 1..AuditPageMax
}

// AuditPage is one page of audit rows, newest first; NextCursor is the
// Before of the next page, nil on the last.
type AuditPage struct {
	Records    []AuditRecord
	NextCursor *int64
}

// ListAudit returns a page of the audit log, newest first. Errors: a
// plain error naming Limit or Before when out of range.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) (AuditPage, error) {
	if f.Limit < 1 || f.Limit > AuditPageMax {
		return AuditPage{}, fmt.Errorf("audit log: limit %d must be in 1..%d", f.Limit, AuditPageMax)
	}
	if f.Before < 0 || f.SinceAgo < 0 {
		return AuditPage{}, errors.New("audit log: before and since must not be negative")
	}
	var since *time.Time
	if !f.Since.IsZero() {
		since = &f.Since
	}
	prefix := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(f.Target) + "%"
	rows, err := s.pool.Query(ctx, `
		SELECT id, at, actor, role, auth, method, route, target, request_id, client, result, coalesce(status, 0), message
		  FROM audit_log
		 WHERE ($1 = 0 OR id < $1) AND ($2 = '' OR actor = $2) AND target LIKE $3
		   AND ($4::timestamptz IS NULL OR at >= $4)
		   AND ($6::bigint = 0 OR at >= now() - $6 * interval '1 microsecond')
		 ORDER BY id DESC LIMIT $5`, f.Before, f.Actor, prefix, since, f.Limit+1, micros(f.SinceAgo))
	if err != nil {
		return AuditPage{}, fmt.Errorf("audit log: %w", err)
	}
	recs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditRecord, error) {
		var a AuditRecord
		err := r.Scan(&a.ID, &a.At, &a.Actor, &a.Role, &a.Auth, &a.Method, &a.Route, &a.Target,
			&a.RequestID, &a.Client, &a.Result, &a.Status, &a.Message)
		return a, err
	})
	if err != nil {
		return AuditPage{}, fmt.Errorf("audit log: %w", err)
	}
	page := AuditPage{Records: recs}
	if len(recs) > f.Limit {
		page.Records = recs[:f.Limit]
		next := page.Records[f.Limit-1].ID
		page.NextCursor = &next
	}
	if page.Records == nil {
		page.Records = []AuditRecord{}
	}
	return page, nil
}

// PruneAudit deletes up to batch audit rows older than now − olderThan,
// fenced as the leader's other retention, and reports how many went.
func (s *Store) PruneAudit(ctx context.Context, epoch int64, olderThan time.Duration, batch int) (int, error) {
	return s.leaderExec(ctx, epoch, "prune audit log", `
		DELETE FROM audit_log WHERE id IN (
		  SELECT id FROM audit_log WHERE at < now() - $1 * interval '1 microsecond' ORDER BY at LIMIT $2)`,
		micros(olderThan), batch)
}

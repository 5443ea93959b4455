package api_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/store"
)

// lastAudit is the newest audit row of actor whose target starts with
// target.
func (h *harness) lastAudit(actor, target string) store.AuditRecord {
	h.t.Helper()
	page, err := h.store.ListAudit(context.Background(), store.AuditFilter{Actor: actor, Target: target, Limit: 1})
	require.NoError(h.t, err)
	require.Len(h.t, page.Records, 1, "no audit row of %s on %s", actor, target)
	return page.Records[0]
}

// TestAuditRowIsInTheChangesTransaction: for each write route, the audit
// row of an allowed call was written by the very transaction that made
// the change: the two rows carry the same transaction id (xmin), so one
// cannot commit without the other. The row names the actor, role, route,
// target, request id and client, and the events of the change name the
// actor ("cancelled by alice").
func TestAuditRowIsInTheChangesTransaction(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	db, err := pgx.Connect(context.Background(), h.dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	xmin := func(sql string, args ...any) string {
		var x string
		require.NoError(t, db.QueryRow(context.Background(), sql, args...).Scan(&x), sql)
		return x
	}
	sameTx := func(what string, rec store.AuditRecord, changed string) {
		t.Helper()
		assert.Equal(t, store.AuditOK, rec.Result, what)
		assert.Zero(t, rec.Status, "%s: recorded with the change, before the reply", what)
		assert.Equal(t, changed, xmin(`SELECT xmin::text FROM audit_log WHERE id = $1`, rec.ID),
			"%s: the audit row and the change are one transaction", what)
	}

	code, e := h.call("POST", "/v1/dags", aliceToken, protocol.ApplyDAGRequest{YAML: wideDAG("aud", 1, "")}, nil)
	require.Equal(t, 200, code, e.Message)
	rec := h.lastAudit("alice", "dags")
	assert.Equal(t, "POST /v1/dags", rec.Route)
	assert.Equal(t, "operator", rec.Role)
	assert.Equal(t, "bearer", rec.Auth)
	assert.NotEmpty(t, rec.RequestID)
	assert.Equal(t, "127.0.0.1", rec.Client)
	sameTx("apply", rec, xmin(`SELECT xmin::text FROM dags WHERE dag_id = 'aud'`))

	var run protocol.Run
	code, e = h.call("POST", "/v1/dags/aud/runs", aliceToken, nil, &run)
	require.Equal(t, 201, code, e.Message)
	sameTx("trigger", h.lastAudit("alice", "dags/aud/runs"), xmin(`SELECT xmin::text FROM runs WHERE id = $1`, run.ID))

	code, e = h.call("POST", "/v1/dags/aud/pause", aliceToken, nil, nil)
	require.Equal(t, 200, code, e.Message)
	sameTx("pause", h.lastAudit("alice", "dags/aud/pause"), xmin(`SELECT xmin::text FROM dags WHERE dag_id = 'aud'`))

	code, e = h.call("POST", fmt.Sprintf("/v1/runs/%d/cancel", run.ID), aliceToken, nil, nil)
	require.Equal(t, 200, code, e.Message)
	rec = h.lastAudit("alice", fmt.Sprintf("runs/%d/cancel", run.ID))
	assert.Equal(t, fmt.Sprintf("runs/%d/cancel", run.ID), rec.Target)
	sameTx("cancel", rec, xmin(`SELECT xmin::text FROM runs WHERE id = $1`, run.ID))
	events, err := h.store.RunEvents(context.Background(), run.ID, 0)
	require.NoError(t, err)
	var messages []string
	for _, ev := range events {
		messages = append(messages, string(ev.Kind)+": "+ev.Message)
	}
	assert.Contains(t, messages, "run_cancelled: cancelled by alice")
	assert.Contains(t, messages, "run_queued: manual run of aud queued with 1 tasks by alice")

	code, e = h.call("PUT", "/v1/thresholds", adaToken, map[string]string{"orphan": "10m"}, nil)
	require.Equal(t, 200, code, e.Message)
	sameTx("thresholds", h.lastAudit("ada", "thresholds"), xmin(`SELECT xmin::text FROM settings LIMIT 1`))

	code, e = h.call("PUT", "/v1/secrets/db_pw", adaToken, protocol.SetSecretRequest{Value: "hunter22"}, nil)
	require.Equal(t, 200, code, e.Message)
	sameTx("secret", h.lastAudit("ada", "secrets/db_pw"), xmin(`SELECT xmin::text FROM secrets WHERE name = 'db_pw'`))

	var reset protocol.FenceResetResponse
	code, e = h.call("POST", "/v1/fence/reset", adaToken, protocol.FenceResetRequest{Reason: "drill"}, &reset)
	require.Equal(t, 200, code, e.Message)
	assert.Equal(t, "ada", reset.Actor)
	rec = h.lastAudit("ada", "fence/reset")
	assert.Equal(t, "drill", rec.Message)
	sameTx("fence reset", rec, xmin(`SELECT xmin::text FROM leader_fence`))
}

// TestRefusedAndFailedCallsAreAudited: a call without a credential, with
// a wrong token, below its role or failing (409, 400) is appended on its
// own with its status and message, and no token appears in the log.
func TestRefusedAndFailedCallsAreAudited(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	h.applyDAG(wideDAG("ref", 1, ""))
	runID := h.trigger("ref")
	cancel := fmt.Sprintf("/v1/runs/%d/cancel", runID)
	code, _ := h.call("POST", cancel, "", nil, nil)
	require.Equal(t, 401, code)
	code, _ = h.call("POST", cancel, "not-a-token-of-anyone", nil, nil)
	require.Equal(t, 401, code)
	code, _ = h.call("POST", cancel, veraToken, nil, nil)
	require.Equal(t, 403, code)
	code, _ = h.call("POST", cancel, aliceToken, nil, nil)
	require.Equal(t, 200, code)
	code, _ = h.call("POST", cancel, aliceToken, nil, nil)
	require.Equal(t, 409, code, "already cancelled")
	code, _ = h.call("PUT", "/v1/thresholds", adaToken, map[string]string{"orphan": "-1s"}, nil)
	require.Equal(t, 400, code)

	page, err := h.store.ListAudit(context.Background(), store.AuditFilter{Limit: 10})
	require.NoError(t, err)
	type row struct {
		actor, auth, result string
		status              int
	}
	var got []row
	for _, r := range page.Records {
		got = append(got, row{r.Actor, r.Auth, r.Result, r.Status})
		for _, tok := range []string{"not-a-token-of-anyone", veraToken, aliceToken, adaToken} {
			assert.NotContains(t, fmt.Sprintf("%+v", r), tok, "no token in the audit log")
		}
	}
	assert.Equal(t, []row{
		{"ada", "bearer", store.AuditFailed, 400},
		{"alice", "bearer", store.AuditFailed, 409},
		{"alice", "bearer", store.AuditOK, 0},
		{"vera", "bearer", store.AuditRefused, 403},
		{"anonymous", "bearer", store.AuditRefused, 401},
		{"anonymous", "", store.AuditRefused, 401},
	}, got)
	assert.Contains(t, page.Records[1].Message, "already cancelled")
	assert.Contains(t, page.Records[3].Message, "viewer role is read-only")
}

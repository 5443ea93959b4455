package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestFenceShowAndReset drives `vigil fence show|reset` against a real
// PostgreSQL: show prints the fence, reset refuses to run without
// --reason and --yes (exit 2, nothing changed), and with both it starts
// generation 1 and records actor and reason, which show then lists.
func TestFenceShowAndReset(t *testing.T) {
	clearClientEnv(t)
	ctx := context.Background()
	url := storetest.DB(t)
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	_, err = st.AcquireFenceIn(ctx, store.FenceDomainEtcd, 900, "replica-a")
	require.NoError(t, err)

	r := runCLI(t, "fence", "show", "--database-url", url)
	require.NoError(t, r.err, r.stderr)
	assert.Contains(t, r.stdout, "GENERATION")
	assert.Regexp(t, `0\s+etcd\s+900\s+900\s+replica-a`, r.stdout)
	assert.Contains(t, r.stdout, "no resets")

	r = runCLI(t, "fence", "reset", "--database-url", url, "--yes")
	assert.Equal(t, exitUsage, r.code)
	assert.ErrorContains(t, r.err, "--reason")
	r = runCLI(t, "fence", "reset", "--database-url", url, "--reason", "etcd restored")
	assert.Equal(t, exitUsage, r.code)
	assert.ErrorContains(t, r.err, "--yes")
	r = runCLI(t, "fence", "reset", "--reason", "x", "--yes", "--actor", "me")
	assert.Equal(t, exitUsage, r.code, "through the API the actor is the token's identity")
	assert.ErrorContains(t, r.err, "--actor: only with --database-url")
	f, err := st.FenceState(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(0), f.Generation, "a refused reset changes nothing")

	r = runCLI(t, "fence", "reset", "--database-url", url, "--reason", "etcd restored from snapshot", "--yes", "--actor", "ops@bastion")
	require.NoError(t, r.err, r.stderr)
	assert.Contains(t, r.stdout, "fence reset by ops@bastion: generation 0 (domain etcd, revision 900, holder replica-a) -> generation 1")
	f, err = st.FenceState(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), f.Generation)
	assert.Equal(t, store.FenceDomain(""), f.Domain)

	r = runCLI(t, "fence", "show", "--database-url", url, "-o", "json")
	require.NoError(t, r.err, r.stderr)
	var got struct {
		Fence  store.FenceState        `json:"fence"`
		Resets []store.FenceAuditEntry `json:"resets"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	assert.Equal(t, int64(1), got.Fence.Generation)
	require.Len(t, got.Resets, 1)
	assert.Equal(t, "ops@bastion", got.Resets[0].Actor)
	assert.Equal(t, "etcd restored from snapshot", got.Resets[0].Reason)
	assert.Equal(t, int64(900), got.Resets[0].BeforeRevision)
	assert.Equal(t, "replica-a", got.Resets[0].BeforeHolder)

	r = runCLI(t, "fence", "show", "--database-url", url)
	require.NoError(t, r.err, r.stderr)
	assert.Contains(t, r.stdout, "resets (newest first):")
	assert.Contains(t, r.stdout, "ops@bastion")
	assert.Contains(t, r.stdout, "etcd restored from snapshot")

	// VIGIL_DATABASE_URL works like every other flag's variable.
	t.Setenv("VIGIL_DATABASE_URL", url)
	r = runCLI(t, "fence", "show", "-o", "json")
	require.NoError(t, r.err, r.stderr)
}

package store_test

// Regression tests for the fence domain: the fence has an explicit domain
// (generation, domain, revision), and an audited reset starts a new
// generation.

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestFenceDomainRefusesOlderRevisionAndOtherDomain: a stored etcd
// revision above the candidate's (etcd restored from a backup) refuses
// the candidate with FenceRefusedRevision; a Lite epoch against an etcd
// fence is refused with FenceRefusedDomain, however large it is. Before
// the fix the Lite epoch, a bare integer, took an etcd fence.
func TestFenceDomainRefusesOlderRevisionAndOtherDomain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openWith(t, storetest.DB(t), store.Options{})

	f, err := st.FenceState(ctx)
	require.NoError(t, err)
	assert.Equal(t, store.FenceState{Name: store.FenceName}, f, "a fresh fence: generation 0, no domain")

	token, err := st.AcquireFenceIn(ctx, store.FenceDomainEtcd, 5000, "r1")
	require.NoError(t, err)
	assert.Equal(t, int64(5000), token, "generation 0: the token is the revision")

	_, err = st.AcquireFenceIn(ctx, store.FenceDomainEtcd, 120, "r2")
	var fe *store.FencedError
	require.True(t, errors.As(err, &fe), "got %v", err)
	assert.Equal(t, store.FenceRefusedRevision, fe.Refusal)
	require.NotNil(t, fe.Fence)
	assert.Equal(t, int64(5000), fe.Fence.Revision)
	assert.Equal(t, store.FenceDomainEtcd, fe.Fence.Domain)
	assert.Equal(t, "r1", fe.Holder)
	assert.Contains(t, err.Error(), "etcd revision 120")

	_, err = st.AcquireFenceIn(ctx, store.FenceDomainLite, 999999, "lite")
	require.True(t, errors.As(err, &fe), "got %v", err)
	assert.Equal(t, store.FenceRefusedDomain, fe.Refusal, "a Lite epoch never takes an etcd fence")

	_, err = st.AcquireFenceIn(ctx, store.FenceDomainEtcd, store.FenceRevisionLimit, "r3")
	require.Error(t, err)
	assert.False(t, store.IsFenced(err), "an out-of-range revision is a plain error")
	_, err = st.AcquireFenceIn(ctx, "zookeeper", 1, "r3")
	require.ErrorContains(t, err, `domain "zookeeper"`)

	token, err = st.AcquireFenceIn(ctx, store.FenceDomainEtcd, 5001, "r2")
	require.NoError(t, err, "a newer revision of the same domain takes it")
	assert.Equal(t, int64(5001), token)
}

// TestResetFenceStartsAuditedGeneration: a reset records who, when and why
// with the fence before it, lets a lower revision (and another domain)
// lead, and fences out every term of the old generation even when the new
// term's revision equals the old one.
func TestResetFenceStartsAuditedGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := openWith(t, storetest.DB(t), store.Options{})
	old, err := st.AcquireFenceIn(ctx, store.FenceDomainEtcd, 5000, "old")
	require.NoError(t, err)

	_, _, err = st.ResetFence(ctx, "", "x")
	require.ErrorContains(t, err, "actor")
	_, _, err = st.ResetFence(ctx, "ops@host", " ")
	require.ErrorContains(t, err, "reason")

	before, after, err := st.ResetFence(ctx, "ops@host", "etcd restored from the 03:00 snapshot")
	require.NoError(t, err)
	assert.Equal(t, int64(0), before.Generation)
	assert.Equal(t, int64(5000), before.Revision)
	assert.Equal(t, "old", before.Holder)
	assert.Equal(t, int64(1), after.Generation)
	assert.Equal(t, store.FenceDomain(""), after.Domain)
	assert.Equal(t, int64(0), after.Revision)
	assert.Equal(t, "", after.Holder)
	assert.Equal(t, store.FenceToken(1, 0), after.Epoch)

	audit, err := st.FenceAudit(ctx, 10)
	require.NoError(t, err)
	require.Len(t, audit, 1)
	a := audit[0]
	assert.Equal(t, "reset", a.Action)
	assert.Equal(t, "ops@host", a.Actor)
	assert.Equal(t, "etcd restored from the 03:00 snapshot", a.Reason)
	assert.Equal(t, store.FenceDomainEtcd, a.BeforeDomain)
	assert.Equal(t, int64(5000), a.BeforeRevision)
	assert.Equal(t, "old", a.BeforeHolder)
	assert.Equal(t, int64(1), a.AfterGeneration)
	assert.False(t, a.At.IsZero())

	// The old term is fenced out at once.
	_, err = st.StartQueuedRuns(ctx, old)
	require.True(t, store.IsFenced(err), "old generation's write: %v", err)

	// A restored etcd's low revision now leads; even the old revision
	// number gives a different token.
	token, err := st.AcquireFenceIn(ctx, store.FenceDomainEtcd, 5000, "new")
	require.NoError(t, err)
	assert.Equal(t, store.FenceToken(1, 5000), token)
	assert.NotEqual(t, old, token)
	_, err = st.StartQueuedRuns(ctx, old)
	require.True(t, store.IsFenced(err), "the old token stays fenced: %v", err)
	_, err = st.StartQueuedRuns(ctx, token)
	require.NoError(t, err)
}

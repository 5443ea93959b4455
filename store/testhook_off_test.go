//go:build !vigil_testhooks

package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/internal/testhook"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// The shipped build reads no test hook from the environment: with
// testhook.EnvHoldLeaderTx set, a leader transaction still runs its
// callback and writes no marker. Not parallel: it sets the environment.
func TestShippedBuildIgnoresTheHookEnvironment(t *testing.T) {
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "held")
	t.Setenv(testhook.EnvHoldLeaderTx, marker)
	st := openWith(t, storetest.DB(t), store.Options{})
	require.NoError(t, st.AcquireFence(ctx, 5, "shipped"))
	ran := false
	require.NoError(t, st.LeaderTx(ctx, 5, func(store.Tx) error { ran = true; return nil }))
	assert.True(t, ran, "the callback ran")
	_, err := os.Stat(marker)
	assert.True(t, os.IsNotExist(err), "no marker: the hook is not in this build")
}

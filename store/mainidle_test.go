package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// The main and heartbeat pools' sessions end when left idle inside a
// transaction for store.MainIdleInTransaction, so a frozen replica cannot
// hold the locks of a half-done write (an agent's log lines) over every
// other replica; a URL that sets the parameter keeps its own value.
func TestMainSessionsEndWhenIdleInATransaction(t *testing.T) {
	t.Parallel()
	url := storetest.DB(t)
	st := openWith(t, url, store.Options{})
	main, hb := poolSettings(t, st, "idle_in_transaction_session_timeout")
	assert.Equal(t, "5s", main, "main pool")
	assert.Equal(t, "5s", hb, "heartbeat pool")

	own := openWith(t, url+"&idle_in_transaction_session_timeout=60000", store.Options{})
	main, _ = poolSettings(t, own, "idle_in_transaction_session_timeout")
	assert.Equal(t, "1min", main, "the URL's own value")
}

// poolSettings reads the setting name in a session of st's main pool and
// of its heartbeat pool.
func poolSettings(t *testing.T, st *store.Store, name string) (main, hb string) {
	t.Helper()
	ctx := context.Background()
	mp, hp := st.PoolsForTest()
	require.NoError(t, mp.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&main))
	require.NoError(t, hp.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&hb))
	return main, hb
}

// Every pool's sessions run with jit off (the planner would compile a
// statement whose row estimate is far off at scale: docs/performance.md,
// "The API at a year of history"), unless the URL sets jit itself.
func TestSessionsRunWithoutJIT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := storetest.DB(t)
	st := openWith(t, url, store.Options{})
	main, hb := poolSettings(t, st, "jit")
	assert.Equal(t, "off", main, "main pool")
	assert.Equal(t, "off", hb, "heartbeat pool")
	var jit string
	require.NoError(t, st.AcquireFence(ctx, 1, "r1"))
	require.NoError(t, st.LeaderTx(ctx, 1, func(tx store.Tx) error {
		return tx.QueryRow(ctx, `SELECT current_setting('jit')`).Scan(&jit)
	}))
	assert.Equal(t, "off", jit, "leader pool")

	own := openWith(t, url+"&jit=on", store.Options{})
	main, _ = poolSettings(t, own, "jit")
	assert.Equal(t, "on", main, "the URL's own value")
}

package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestHeartbeatLocksTIsInIDOrder pins the lock order that keeps a
// heartbeat and a batched completion of the same agent from deadlocking.
// The agent lists an attempt whose completion is in flight in its
// heartbeats until the completion lands, so both statements lock the
// same TI rows; the completion batch locks them in id order, and so must
// the heartbeat. Before it did, a Lite burn-down at about 230 TIs/s hit
// `deadlock detected` five times within 6 s: the aborted heartbeat made
// the agent re-register, and a claim in flight then was lost
// (docs/performance.md, "A small supervisor program").
//
// Method: the lower TI's row is moved behind the higher one's (two
// non-HOT updates), so that any scan that returns rows in heap order (as
// ti_agent_idx returns equal keys) meets the higher TI first. Another
// transaction holds the lower TI's row lock; the heartbeat must queue on
// it without having locked the higher TI, which a third transaction then
// locks NOWAIT. The waits are observed in pg_stat_activity, not timed.
func TestHeartbeatLocksTIsInIDOrder(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	ctx := e.ctx
	e.apply("dag_id: pair\ntasks:\n  - id: x\n    command: [\"true\"]\n  - id: y\n    command: [\"true\"]\n")
	e.trigger("pair")
	e.tick()
	agentID := storetest.Agent(t, e.st, store.Registration{Name: "w", Capacity: 2})
	tasks, err := e.st.Claim(ctx, agentID, 2)
	require.NoError(t, err)
	require.Len(t, tasks, 2)
	slices.SortFunc(tasks, func(a, b store.ClaimedTask) int { return int(b.TIID - a.TIID) }) // higher id first
	entries := []store.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}, {Attempt: tasks[1].Attempt, Started: true}}
	high, low := tasks[0].TIID, tasks[1].TIID
	for _, st := range []string{"queued", "running"} { // state is indexed: not heap-only
		_, err = e.raw.Exec(ctx, `UPDATE task_instances SET state = $2 WHERE id = $1`, low, st)
		require.NoError(t, err)
	}
	var heapOrder []int64
	require.NoError(t, e.raw.QueryRow(ctx, `SELECT array_agg(id ORDER BY ctid) FROM task_instances
		WHERE agent_id = $1 AND state = 'running'`, agentID).Scan(&heapOrder))
	require.Equal(t, []int64{high, low}, heapOrder, "precondition: the higher TI comes first in heap order")

	holder, err := e.raw.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT 1 FROM task_instances WHERE id = $1 FOR NO KEY UPDATE`, low)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, _, err := e.st.Heartbeat(ctx, agentID, entries)
		done <- err
	}()
	require.Eventually(t, func() bool {
		return e.count(`SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%started_at IS NOT NULL FROM task_instances%'`) == 1
	}, 10*time.Second, 5*time.Millisecond, "the heartbeat queues on the lower TI's lock")

	probe, err := e.raw.Begin(ctx)
	require.NoError(t, err)
	_, err = probe.Exec(ctx, `SELECT 1 FROM task_instances WHERE id = $1 FOR NO KEY UPDATE NOWAIT`, high)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		t.Errorf("the heartbeat, waiting for TI %d, already holds TI %d (%s): it locks out of id order", low, high, pgErr.Code)
	} else {
		require.NoError(t, err)
	}
	require.NoError(t, probe.Rollback(ctx))
	require.NoError(t, holder.Rollback(context.WithoutCancel(ctx)))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the heartbeat did not finish once the lock was released")
	}
}

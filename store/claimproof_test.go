package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/scheduler"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// Claim-path proofs (docs/design.md §4 claim, adr/0018): a claim over a
// deep queue of work the agent cannot take reads a bounded number of
// task_instances rows, whatever the depth; an idle claim long-poll writes
// nothing. Both measure with the observer of scale_seed_test.go: the work
// runs on connections of its own, which are closed, so the flushed
// counters of pg_stat_user_tables are exact.

// claimSeed is a database with deep TIs queued that need the tag "gpu",
// taken by no agent here, then fit TIs queued after them that need no tag,
// and an agent with no tags. It returns the agent's id and credential.
func claimSeed(t *testing.T, url string, deep, fit int) (int64, string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var runID int64
	require.NoError(t, conn.QueryRow(ctx, `
		WITH d AS (INSERT INTO dags (dag_id, spec, spec_hash, max_active_tasks) VALUES ('deep', '{}', 'seed', 1000000))
		INSERT INTO runs (dag_id, state, max_active_tasks, start_date) VALUES ('deep', 'running', 1000000, now())
		RETURNING id`).Scan(&runID))
	_, err = conn.Exec(ctx, `
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, command, required_tags, state, queued_at)
		SELECT $1, 'deep', 'gpu' || g, g, '{true}', '{gpu}', 'queued', now() - interval '1 day' + g * interval '1 ms'
		  FROM generate_series(1, $2) g`, runID, deep)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `
		INSERT INTO task_instances (run_id, dag_id, task_id, ordinal, command, state, queued_at)
		SELECT $1, 'deep', 'cpu' || g, $2 + g, '{true}', 'queued', now() + g * interval '1 ms'
		  FROM generate_series(1, $3) g`, runID, deep, fit)
	require.NoError(t, err)
	for _, q := range []string{
		`ALTER TABLE task_instances SET (autovacuum_enabled = false)`,
		`ALTER TABLE agents SET (autovacuum_enabled = false)`,
		`VACUUM ANALYZE task_instances`,
	} {
		_, err = conn.Exec(ctx, q)
		require.NoError(t, err)
	}
	st, err := store.Open(ctx, url)
	require.NoError(t, err)
	defer st.Close()
	reg, err := st.Register(ctx, store.Registration{Name: "cpu-only", Capacity: 10})
	require.NoError(t, err)
	return reg.AgentID, reg.Credential
}

// TestClaimReadsBoundedRowsOverADeepBacklog: an agent that can take none
// of the oldest queued TIs claims the ones it can take while reading as
// few task_instances rows at a 20,000-deep backlog as at a 2,000-deep one.
func TestClaimReadsBoundedRowsOverADeepBacklog(t *testing.T) {
	t.Parallel()
	var reads []int64
	for _, deep := range []int{2000, 20000} {
		url := storetest.DB(t)
		agentID, _ := claimSeed(t, url, deep, 3)
		obs := newObserver(t, url)
		var got []store.ClaimedTask
		d := obs.measure(t, url, func(ctx context.Context, st *store.Store) error {
			c, err := st.Claimable(ctx, agentID)
			if err != nil {
				return err
			}
			if !c.Queued || c.Room != 10 {
				return fmt.Errorf("claimable: %+v, want queued work and room 10", c)
			}
			got, err = st.Claim(ctx, agentID, 2)
			return err
		})
		require.Len(t, got, 2)
		assert.ElementsMatch(t, []string{"cpu1", "cpu2"}, []string{got[0].TaskID, got[1].TaskID}, "the oldest fit TIs")
		ti := d["task_instances"]
		t.Logf("deep backlog %d: task_instances %s", deep, ti)
		assert.Zero(t, ti.SeqScan, "no sequential scan")
		assert.Contains(t, ti.UsedIndexes(), "ti_queued_tags_idx")
		n := ti.HeapRows() + ti.IndexRows()
		assert.LessOrEqual(t, n, int64(40), "rows read by a look and a claim of 2")
		reads = append(reads, n)
	}
	assert.LessOrEqual(t, reads[1]-reads[0], int64(probeSlack), "rows read do not grow with the backlog")
}

// TestLookAndClaimWalksTheTagSetsOnce: a round of the claim long-poll is
// one statement that probes ti_queued_tags_idx once per distinct queued
// tag set and once past the last to list them, then once per set that
// fits the agent to take its oldest entries: 3 + 1 probes here ({} and
// {gpu} queued, only {} fits). The look then the claim (Claimable, Claim)
// made one more, the look's (which stops at the first set that fits, here
// the first): 1 + 3 + 1. It writes the claimed TIs and the
// agent row; with fitting work queued but no room left it writes nothing.
func TestLookAndClaimWalksTheTagSetsOnce(t *testing.T) {
	t.Parallel()
	url := storetest.DB(t)
	ctx := context.Background()
	agentID, _ := claimSeed(t, url, 2000, 4)
	obs := newObserver(t, url)
	probes := func(d map[string]tableStats) int64 { return d["task_instances"].IndexScans["ti_queued_tags_idx"] }
	c, got, d := measureRound(t, obs, url, agentID, 2)
	require.Len(t, got, 2)
	assert.Empty(t, c.Tags)
	assert.Equal(t, 10, c.Room, "room before the claim")
	assert.True(t, c.Queued)
	assert.Equal(t, int64(4), probes(d), "task_instances: %s", d["task_instances"])
	assert.Equal(t, int64(2), d["task_instances"].Upd)
	assert.Equal(t, int64(1), d["agents"].Upd)

	split := measureLookThenClaim(t, obs, url, agentID)
	assert.Equal(t, int64(5), probes(split), "the look, then the claim: task_instances: %s", split["task_instances"])

	// On a connection of its own, closed before the measurement: the
	// observer's own backend flushes its counters when it likes (at most
	// once a second), so an update made on it could land inside the
	// measured window, while quiesce waits for other backends to exit.
	set, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	_, err = set.Exec(ctx, `UPDATE agents SET capacity = 3 WHERE id = $1`, agentID)
	require.NoError(t, err)
	require.NoError(t, set.Close(ctx))
	c, got, full := measureRound(t, obs, url, agentID, 2)
	assert.Empty(t, got)
	assert.Equal(t, 0, c.Room, "capacity 3, 3 running")
	assert.True(t, c.Queued, "one fit TI left")
	for table, s := range full {
		assert.Zerof(t, s.Ins+s.Upd+s.Del, "%s: rows written by an empty claim: %s", table, s)
	}
}

// TestClaimSeeksPastClaimedEntries: the entries of claimed TIs stay in
// ti_queued_tags_idx, at the front of their tag set's run, until vacuum;
// an index scan skips them cheaply once it has marked them dead, which it
// can only do when no snapshot still sees their queued versions. Here an
// open repeatable-read snapshot keeps 1,000 claimed entries visible to
// someone, so every scan reads each of them: the claim round reads them
// once, in the probe that lists the tag sets, and its candidates' scan
// starts at the oldest live entry that probe found. The look then the
// claim read them twice.
func TestClaimSeeksPastClaimedEntries(t *testing.T) {
	t.Parallel()
	const claimed = 1000
	url := storetest.DB(t)
	ctx := context.Background()
	agentID, _ := claimSeed(t, url, 10, claimed+4)
	obs := newObserver(t, url)
	_, err := obs.conn.Exec(ctx, `BEGIN ISOLATION LEVEL REPEATABLE READ`)
	require.NoError(t, err)
	_, err = obs.conn.Exec(ctx, `SELECT count(*) FROM agents`) // takes the snapshot
	require.NoError(t, err)
	defer func() { _, _ = obs.conn.Exec(ctx, `ROLLBACK`) }()
	raw, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	_, err = raw.Exec(ctx, `UPDATE task_instances SET state = 'running', claimed_at = now()
		WHERE task_id LIKE 'cpu%' AND ordinal <= 10 + $1`, claimed)
	require.NoError(t, err)
	require.NoError(t, raw.Close(ctx))

	read := func(d map[string]tableStats) int64 { return d["task_instances"].IndexTupRead["ti_queued_tags_idx"] }
	_, got, d := measureRound(t, obs, url, agentID, 2)
	require.Len(t, got, 2)
	assert.ElementsMatch(t, []string{"cpu1001", "cpu1002"}, []string{got[0].TaskID, got[1].TaskID})
	t.Logf("claim round: ti_queued_tags_idx entries read %d", read(d))
	assert.GreaterOrEqual(t, read(d), int64(claimed), "the probe listing the tag sets still reads the claimed entries")
	assert.LessOrEqual(t, read(d), int64(claimed+20), "the candidates' scan starts past them")

	split := measureLookThenClaim(t, obs, url, agentID)
	t.Logf("look, then claim: ti_queued_tags_idx entries read %d", read(split))
	assert.GreaterOrEqual(t, read(split), int64(2*claimed), "the look and the claim each list the tag sets")
}

// measureRound runs one claim round (store.LookAndClaim) for slots on
// a Store of its own and returns its result and what it did to each table.
func measureRound(t *testing.T, obs *observer, url string, agentID int64, slots int) (store.Claimability, []store.ClaimedTask, map[string]tableStats) {
	var c store.Claimability
	var got []store.ClaimedTask
	d := obs.measure(t, url, func(ctx context.Context, st *store.Store) error {
		var err error
		c, got, err = st.LookAndClaim(ctx, agentID, slots)
		return err
	})
	return c, got, d
}

// measureLookThenClaim runs the look (store.Claimable) then a claim of
// one (store.Claim), the round's earlier two statements, and returns
// what they did to each table.
func measureLookThenClaim(t *testing.T, obs *observer, url string, agentID int64) map[string]tableStats {
	return obs.measure(t, url, func(ctx context.Context, st *store.Store) error {
		if _, err := st.Claimable(ctx, agentID); err != nil {
			return err
		}
		_, err := st.Claim(ctx, agentID, 1)
		return err
	})
}

// TestIdleClaimLongPollWritesNothing: a claim long-poll of an agent that
// can take none of the queued work writes no row of any table, though it
// looks again on the 1 s poll and on a queue notification, whether the
// notification's tag sets fit the agent (a wake-all "" payload) or not.
func TestIdleClaimLongPollWritesNothing(t *testing.T) {
	t.Parallel()
	url := storetest.DB(t)
	agentID, cred := claimSeed(t, url, 500, 0)
	obs := newObserver(t, url)
	d := obs.measure(t, url, func(ctx context.Context, st *store.Store) error {
		return idleLongPoll(ctx, st, agentID, cred, func() error {
			for _, payload := range []string{`[["gpu"]]`, ``} {
				if _, err := obs.conn.Exec(ctx, `SELECT pg_notify($1, $2)`, store.ChanQueued, payload); err != nil {
					return err
				}
			}
			return nil
		})
	})
	for table, s := range d {
		assert.Zerof(t, s.Ins+s.Upd+s.Del, "%s: rows written by an idle long-poll: %s", table, s)
	}
	// The credential check and the first look read the agent row at
	// least; the poll added more looks.
	assert.GreaterOrEqual(t, d["agents"].IdxScan, int64(3), "agents: %s", d["agents"])
}

// idleLongPoll serves the API on st and makes one 1.5 s claim long-poll
// for agentID, calling during it notify; it expects no task.
func idleLongPoll(ctx context.Context, st *store.Store, agentID int64, cred string, notify func() error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	m := metrics.New()
	lis := st.Listen(ctx, log, store.ChanQueued)
	defer lis.Close()
	sched, err := scheduler.New(scheduler.Config{Store: st, Listener: lis, Metrics: m, Logger: log, Interval: time.Minute})
	if err != nil {
		return err
	}
	srv, err := api.New(api.Config{Store: st, Listener: lis, Metrics: m, Logger: log,
		AgentToken: "agent", OperatorToken: "operator", Control: sched})
	if err != nil {
		return err
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	body, _ := json.Marshal(protocol.ClaimRequest{Slots: 5, Wait: protocol.Duration(1500 * time.Millisecond)})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/v1/agents/%d/claim", hs.URL, agentID), bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer agent")
	req.Header.Set(protocol.HeaderAgentCredential, cred)
	type reply struct {
		resp protocol.ClaimResponse
		err  error
	}
	done := make(chan reply, 1)
	go func() {
		resp, err := hs.Client().Do(req)
		if err != nil {
			done <- reply{err: err}
			return
		}
		defer resp.Body.Close()
		var r reply
		if resp.StatusCode != http.StatusOK {
			r.err = fmt.Errorf("claim: status %d", resp.StatusCode)
		} else {
			r.err = json.NewDecoder(resp.Body).Decode(&r.resp)
		}
		done <- r
	}()
	if err := notify(); err != nil {
		return err
	}
	r := <-done
	if r.err != nil {
		return r.err
	}
	if len(r.resp.Tasks) != 0 {
		return fmt.Errorf("claimed %d tasks, want none", len(r.resp.Tasks))
	}
	hs.CloseClientConnections()
	return nil
}

package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/vigil-sched/vigil/agent/supervisor"
	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/api/client"
	"github.com/vigil-sched/vigil/controlplane"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/leader/etcdtest"
	"github.com/vigil-sched/vigil/store/storetest"
)

// TestMain makes the test binary its own task supervisor, as vigil is
// (the agent runs each task under `<self> __supervise`), then runs the
// tests against a real PostgreSQL.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == supervisor.Subcommand {
		os.Exit(supervisor.Run(os.Args[2:]))
	}
	storetest.Main(m)
}

// waitTimeout bounds every wait for a control plane to reach a state.
const waitTimeout = 30 * time.Second

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// health reads GET /monitor/health; ok is false when it does not answer.
func health(url string) (api.HealthReport, bool) {
	var rep api.HealthReport
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url + "/monitor/health")
	if err != nil {
		return rep, false
	}
	defer resp.Body.Close()
	return rep, json.NewDecoder(resp.Body).Decode(&rep) == nil
}

func leading(url string) bool {
	rep, ok := health(url)
	return ok && rep.Leader != nil && rep.Leader.Leading
}

// TestLiteRunsADAGAndStops: a Lite control plane on a real database
// applies its DAGs folder, generates its tokens into DataDir, leads, and
// its in-process agent runs a triggered run to success; Stop closes the
// API, and a second Stop returns at once.
func TestLiteRunsADAGAndStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dags, dataDir := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dags, "hello.yaml"),
		[]byte("dag_id: cp-hello\ntasks:\n  - id: hello\n    command: [\"true\"]\n"), 0o600))
	cp, err := controlplane.Start(ctx, controlplane.Config{
		Logger: quietLog(), DatabaseURL: storetest.DB(t), DataDir: dataDir, Listen: "127.0.0.1:0",
		TickInterval: 50 * time.Millisecond, DAGs: dags, Agents: controlplane.LocalAgents{Count: 1},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cp.Stop(ctx) })

	for file, served := range map[string]string{"operator.token": cp.OperatorToken(), "agent.token": cp.AgentToken()} {
		tok, err := os.ReadFile(filepath.Join(dataDir, file))
		require.NoError(t, err)
		assert.Equal(t, served, strings.TrimSpace(string(tok)), "the generated %s is the one served", file)
	}
	require.Eventually(t, func() bool { return leading(cp.URL()) }, waitTimeout, 20*time.Millisecond, "Lite leads")

	c, err := client.New(cp.URL(), cp.OperatorToken(), nil)
	require.NoError(t, err)
	run, err := c.TriggerRun(ctx, "cp-hello")
	require.NoError(t, err, "the DAGs folder was applied")
	require.Eventually(t, func() bool {
		d, err := c.GetRun(ctx, run.ID)
		return err == nil && d.State == "success"
	}, waitTimeout, 20*time.Millisecond, "the in-process agent runs the run to success")

	require.NoError(t, cp.Stop(ctx))
	_, ok := health(cp.URL())
	assert.False(t, ok, "the API is closed after Stop")
	assert.NoError(t, cp.Stop(ctx), "a second Stop")
}

// TestProHandsOverOnStop: two Pro replicas on one database and a real
// etcd both serve; one leads, and its Stop hands leadership over at once
// (its campaign key is gone when Stop returns, not when its lease
// expires), so the other leads.
func TestProHandsOverOnStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, endpoints := storetest.DB(t), etcdtest.Start(t)
	start := func(id string) *controlplane.ControlPlane {
		cp, err := controlplane.Start(ctx, controlplane.Config{
			Logger: quietLog(), DatabaseURL: db, Listen: "127.0.0.1:0",
			AgentToken: "agent-" + id, OperatorToken: "operator",
			Pro: &controlplane.Pro{Endpoints: endpoints, ElectionTTL: 10 * time.Second, ReplicaID: id},
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = cp.Stop(ctx) })
		return cp
	}
	r1 := start("r1")
	require.Eventually(t, func() bool { return leading(r1.URL()) }, waitTimeout, 20*time.Millisecond, "r1 leads")
	r2 := start("r2")
	rep, ok := health(r2.URL())
	require.True(t, ok, "r2 serves once Start returns")
	require.NotNil(t, rep.Leader)
	assert.False(t, rep.Leader.Leading, "r2 follows")

	require.NoError(t, r1.Stop(ctx))
	// Stop resigned (and closed the session): r1's campaign key is gone
	// when it returns, not one 10 s lease later.
	cli := etcdtest.NewClient(t, endpoints)
	resp, err := cli.Get(ctx, leader.DefaultEtcdPrefix+"/", clientv3.WithPrefix())
	require.NoError(t, err)
	for _, kv := range resp.Kvs {
		assert.NotEqual(t, "r1", string(kv.Value), "r1's campaign key outlived its Stop")
	}
	require.Eventually(t, func() bool { return leading(r2.URL()) }, waitTimeout, 20*time.Millisecond, "r2 leads once r1 stopped")
}

// TestStopWithoutStart: Stop of a control plane never started does
// nothing.
func TestStopWithoutStart(t *testing.T) {
	var nilCP *controlplane.ControlPlane
	assert.NoError(t, nilCP.Stop(context.Background()))
	assert.NoError(t, (&controlplane.ControlPlane{}).Stop(context.Background()))
}

// TestBadConfigNamesTheField: a Config refused before anything starts is
// an ErrConfig whose FieldError names the field.
func TestBadConfigNamesTheField(t *testing.T) {
	t.Parallel()
	pro := &controlplane.Pro{Endpoints: []string{"http://127.0.0.1:1"}}
	lite := controlplane.Config{Logger: quietLog(), DataDir: t.TempDir(), Listen: "127.0.0.1:0"}
	cases := []struct {
		field string
		edit  func(*controlplane.Config)
	}{
		{"DataDir", func(c *controlplane.Config) { c.DataDir = "" }},
		{"DatabaseWait", func(c *controlplane.Config) { c.DatabaseWait = -time.Second }},
		{"ViewerToken", func(c *controlplane.Config) { c.AgentToken, c.ViewerToken = "same", "same" }},
		{"HeartbeatInterval", func(c *controlplane.Config) { c.HeartbeatInterval = 10 * time.Millisecond }},
		{"BulkLimit", func(c *controlplane.Config) { c.BulkLimit = 100000 }},
		{"Agents.Count", func(c *controlplane.Config) { c.Agents.Count = controlplane.MaxLocalAgents + 1 }},
		{"Agents.DrainTimeout", func(c *controlplane.Config) { c.Agents.DrainTimeout = -time.Second }},
		{"DatabaseURL", func(c *controlplane.Config) { c.Pro = pro }},
		{"Pro.Endpoints", func(c *controlplane.Config) { c.DatabaseURL, c.Pro = "postgres://x", &controlplane.Pro{} }},
		{"AgentToken", func(c *controlplane.Config) { c.DatabaseURL, c.Pro = "postgres://x", pro }},
	}
	for _, tc := range cases {
		cfg := lite
		tc.edit(&cfg)
		cp, err := controlplane.Start(context.Background(), cfg)
		require.Error(t, err, tc.field)
		assert.Nil(t, cp)
		assert.ErrorIs(t, err, controlplane.ErrConfig, tc.field)
		var fe *controlplane.FieldError
		require.ErrorAs(t, err, &fe, tc.field)
		assert.Equal(t, tc.field, fe.Field)
		assert.True(t, strings.HasPrefix(err.Error(), tc.field+": "), "%s: %v", tc.field, err)
	}
}

// TestFailedStartUndoesItsSteps: a busy Listen fails first, naming the
// field; a DAGs folder that does not load fails after the listener, the
// store and its migrations, and the port is free again afterwards.
func TestFailedStartUndoesItsSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	_, err = controlplane.Start(ctx, controlplane.Config{Logger: quietLog(), DataDir: t.TempDir(), Listen: busy.Addr().String()})
	var fe *controlplane.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "Listen", fe.Field)
	assert.ErrorIs(t, err, syscall.EADDRINUSE)
	assert.NotErrorIs(t, err, controlplane.ErrConfig, "a busy port is not a bad Config")
	assert.Contains(t, fe.Named("--listen"), "--listen "+busy.Addr().String()+": the address is already in use")

	addr := busy.Addr().String()
	require.NoError(t, busy.Close())
	_, err = controlplane.Start(ctx, controlplane.Config{
		Logger: quietLog(), DatabaseURL: storetest.DB(t), DataDir: t.TempDir(), Listen: addr,
		DAGs: filepath.Join(t.TempDir(), "missing"),
	})
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "DAGs", fe.Field)
	assert.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err, "the failed Start closed its listener")
	require.NoError(t, ln.Close())
}

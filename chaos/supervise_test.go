package chaos

import (
	"context"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheHarnessKeepsOneProcessPerSlotAndLeavesNoneBehind runs real
// `vigil server` and `vigil agent` processes in harness slots: a replica
// waiting for a database nobody serves (--database-wait) and an agent
// whose only link leads nowhere, so both stay alive on their own. The
// replica's slot is started again while its process lives (the second
// 1,000-fault run's leak): the old process is killed first. Both
// processes are then killed behind the harness's back: the supervisor
// starts each slot again. After stop nothing the harness started is
// alive, every end is recorded, and the process check finds no breach.
func TestTheHarnessKeepsOneProcessPerSlotAndLeavesNoneBehind(t *testing.T) {
	c := &cluster{cfg: Config{VigilBin: buildVigil(t), Timing: DefaultTiming}, dir: t.TempDir(), rec: newRecorder()}
	c.tox = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	restarted := make(chan string, 8)
	c.restarted = func(name string) { restarted <- name }
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			c.stop(context.Background())
		}
	})
	listen, err := freeAddr()
	require.NoError(t, err)
	r := &replica{id: "r1", url: "http://" + listen, args: []string{"server",
		"--database-url", "postgres://vigil@127.0.0.1:1/vigil?sslmode=disable", "--database-wait", "10m",
		"--etcd-endpoints", "http://127.0.0.1:1", "--listen", listen, "--replica-id", "r1",
		"--agent-token", agentToken, "--operator-token", operatorToken, "--log-format", "json"}}
	c.replicas = []*replica{r}
	require.NoError(t, c.startReplica(r))
	first := c.current(&r.procSlot)
	require.NoError(t, c.startReplica(r))
	assert.True(t, first.exited(), "the slot's live process was killed before another started")
	second := c.current(&r.procSlot)
	assert.False(t, second.exited())

	link, err := c.proxy("a0-r1", "127.0.0.1:1")
	require.NoError(t, err)
	a := &agentSlot{slot: 0, name: "agent-0", links: []*toxiproxy.Proxy{link}}
	c.agents = []*agentSlot{a}
	require.NoError(t, c.startAgent(a, false))
	agent := c.current(&a.procSlot)

	require.NoError(t, syscall.Kill(second.pid(), syscall.SIGKILL))
	require.NoError(t, syscall.Kill(agent.pid(), syscall.SIGKILL))
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case name := <-restarted:
			got[name] = true
		case <-time.After(time.Minute):
			t.Fatalf("the supervisor restarted only %v", got)
		}
	}
	assert.Equal(t, map[string]bool{"server-r1-3": true, "a0-2": true}, got)

	c.stop(context.Background())
	stopped = true
	assert.Empty(t, c.leftovers())
	procs := c.rec.processes()
	ends := map[string]ProcEnd{}
	for _, p := range procs {
		assert.False(t, p.Ended.IsZero(), "%s: exit recorded", p.Instance)
		assert.Positive(t, p.PID)
		ends[p.Instance] = p.End
		assert.Equal(t, p.Instance == "server-r1-3" || p.Instance == "a0-2", p.Supervised, p.Instance)
	}
	assert.Equal(t, map[string]ProcEnd{"server-r1-1": EndReplaced, "server-r1-2": EndOnItsOwn, "server-r1-3": EndStopped,
		"a0-1": EndOnItsOwn, "a0-2": EndStopped}, ends)
	res := checkProcesses(&History{Processes: procs, Leftovers: c.leftovers(), End: time.Now()})
	assert.Empty(t, res.Violations)
	assert.Contains(t, res.Notes[1], ": 1")
	agents := map[string]bool{}
	c.rec.mu.Lock()
	for inst, ai := range c.rec.agents {
		agents[inst] = !ai.Ended.IsZero()
	}
	c.rec.mu.Unlock()
	assert.Equal(t, map[string]bool{"a0-1": true, "a0-2": true}, agents, "both agent instances' ends recorded")
}

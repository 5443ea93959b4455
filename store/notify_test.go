package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/vigil-sched/vigil/store"
)

// verdict is one call of a SubscribeFunc match: the payload it judged and
// its answer.
type verdict struct {
	payload string
	wake    bool
}

// TestQueuedNotificationCarriesTagSets: the statement that queues TIs
// sends their distinct required_tags arrays on ChanQueued; a subscriber
// whose tags fit them accepts the notification and is woken, one whose
// tags do not rejects it.
func TestQueuedNotificationCarriesTagSets(t *testing.T) {
	t.Parallel()
	e := newSchedEnv(t)
	lis := e.st.Listen(e.ctx, nil, store.ChanQueued)
	defer lis.Close()
	judge := func(tags []string, seen chan<- verdict) func(string) bool {
		return func(payload string) bool {
			sets, ok := store.QueuedPayload(payload)
			wake := !ok
			for _, s := range sets {
				wake = wake || store.TagsFit(s, tags)
			}
			seen <- verdict{payload, wake}
			return wake
		}
	}
	gpuSeen, cpuSeen := make(chan verdict, 16), make(chan verdict, 16)
	gpuCh, unsubGPU := lis.SubscribeFunc(store.ChanQueued, judge([]string{"gpu", "linux"}, gpuSeen))
	defer unsubGPU()
	_, unsubCPU := lis.SubscribeFunc(store.ChanQueued, judge([]string{"cpu"}, cpuSeen))
	defer unsubCPU()

	e.apply("dag_id: g\nmax_active_runs: 100\ntasks:\n  - id: a\n    command: [\"true\"]\n    tags: [gpu]\n" +
		"  - id: b\n    command: [\"true\"]\n    tags: [gpu]\n  - id: c\n    command: [\"true\"]\n    tags: [linux, gpu]\n")
	// The listener may connect after the work is queued (notifications
	// are hints); queue again until the subscribers have judged one.
	deadline := time.After(20 * time.Second)
	var g, c verdict
	for g.payload == "" {
		e.trigger("g")
		e.tick()
		select {
		case g = <-gpuSeen:
			c = <-cpuSeen
		case <-time.After(500 * time.Millisecond):
		case <-deadline:
			t.Fatal("no ChanQueued notification reached the listener")
		}
	}
	sets, ok := store.QueuedPayload(g.payload)
	assert.True(t, ok, "payload %q", g.payload)
	assert.ElementsMatch(t, [][]string{{"gpu"}, {"linux", "gpu"}}, sets, "each distinct array once")
	assert.True(t, g.wake, "gpu work concerns the gpu agent")
	assert.Equal(t, g.payload, c.payload)
	assert.False(t, c.wake, "gpu work does not concern the cpu agent")
	select {
	case <-gpuCh:
	case <-time.After(10 * time.Second):
		t.Fatal("the gpu subscriber was not woken")
	}
}

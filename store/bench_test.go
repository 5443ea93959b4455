package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const benchEpoch = 1

func benchStore(b *testing.B, tasks int) *store.Store {
	b.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.DB(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	if err := st.AcquireFence(ctx, benchEpoch, "bench"); err != nil {
		b.Fatal(err)
	}
	spec, err := dag.Parse([]byte(storetest.WideDAGYAML("wide", tasks)))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.ApplyDAG(ctx, spec); err != nil {
		b.Fatal(err)
	}
	return st
}

func schedule(b *testing.B, st *store.Store) {
	ctx := context.Background()
	for {
		res, err := st.ScheduleDirty(ctx, benchEpoch, 1000)
		if err != nil {
			b.Fatal(err)
		}
		if res.Runs == 0 {
			return
		}
	}
}

// BenchmarkClaimHeartbeatComplete measures one TI's agent round trip at
// the store: claim (FOR UPDATE SKIP LOCKED), a started heartbeat, and a
// guarded completion.
func BenchmarkClaimHeartbeatComplete(b *testing.B) {
	st := benchStore(b, 1000)
	ctx := context.Background()
	agent := storetest.Agent(b, st, store.Registration{Name: "bench", Capacity: 1000})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%1000 == 0 {
			b.StopTimer()
			if _, err := st.TriggerRun(ctx, "wide"); err != nil {
				b.Fatal(err)
			}
			schedule(b, st)
			b.StartTimer()
		}
		tasks, err := st.Claim(ctx, agent, 1)
		if err != nil || len(tasks) != 1 {
			b.Fatalf("claim: %v (%d)", err, len(tasks))
		}
		if _, _, err := st.Heartbeat(ctx, agent, []store.HeartbeatEntry{{Attempt: tasks[0].Attempt, Started: true}}); err != nil {
			b.Fatal(err)
		}
		if _, _, err := st.Complete(ctx, agent, store.Completion{Attempt: tasks[0].Attempt, Outcome: state.OutcomeSuccess}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchedHeartbeat measures one agent heartbeat carrying 100
// running attempts (docs/design.md §4: one transaction per agent).
func BenchmarkBatchedHeartbeat(b *testing.B) {
	st := benchStore(b, 100)
	ctx := context.Background()
	agent := storetest.Agent(b, st, store.Registration{Name: "bench", Capacity: 1000})
	if _, err := st.TriggerRun(ctx, "wide"); err != nil {
		b.Fatal(err)
	}
	schedule(b, st)
	tasks, err := st.Claim(ctx, agent, 100)
	if err != nil || len(tasks) != 100 {
		b.Fatalf("claim: %v (%d)", err, len(tasks))
	}
	entries := make([]store.HeartbeatEntry, len(tasks))
	for i, t := range tasks {
		entries[i] = store.HeartbeatEntry{Attempt: t.Attempt, Started: true}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := st.Heartbeat(ctx, agent, entries); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSchedulerTickSteps measures an idle incremental tick (one
// fenced ScheduleDirty) beside 50 running runs of 100 TIs each.
func BenchmarkSchedulerTickSteps(b *testing.B) {
	st := benchStore(b, 100)
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		if _, err := st.TriggerRun(ctx, "wide"); err != nil {
			b.Fatal(err)
		}
	}
	schedule(b, st)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := st.ScheduleDirty(ctx, benchEpoch, 256); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQueueWideRuns measures the scheduling pass that takes 8 freshly
// triggered runs of 1,000 TIs each (DefaultPassTIs' worth) from queued to
// every TI queued: start, schedule and the queue step over wide runs,
// the tick's work in a burn-down (docs/performance.md). It reports the
// TIs queued per second of pass.
func BenchmarkQueueWideRuns(b *testing.B) {
	const runs, width = 8, 1000
	st := benchStore(b, width)
	ctx := context.Background()
	var queued int
	var spent time.Duration
	for i := 0; i < b.N; i++ {
		for r := 0; r < runs; r++ {
			if _, err := st.TriggerRun(ctx, "wide"); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		res, err := st.SchedulePass(ctx, benchEpoch, store.PassLimit{Runs: 256, TIs: store.DefaultPassTIs})
		spent += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if res.Queued != runs*width {
			b.Fatalf("pass queued %d TIs, want %d: %+v", res.Queued, runs*width, res)
		}
		queued += res.Queued
	}
	b.ReportMetric(float64(queued)/spent.Seconds(), "TIs-queued/s")
}

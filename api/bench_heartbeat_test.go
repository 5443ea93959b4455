package api_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/store"
)

// BenchmarkHeartbeatUnderLoad measures heartbeat latency while bulk agent
// work runs: 50 agents each heartbeat 200 running TIs (10,000 in all) as
// fast as they can, one request in flight each, while 4 synthetic agents
// claim and batch-complete 5,000 more TIs. It reports TI-heartbeats/s
// and the per-request p50 and p99. Heartbeats run on their own pool
// (store.Priority), so the bulk work does not queue them. Run with
//
//	go test -run '^$' -bench HeartbeatUnderLoad -benchtime 1x ./api/
func BenchmarkHeartbeatUnderLoad(b *testing.B) {
	const hbAgents, perAgent, bulkRuns = 50, 200, 5
	p := newBenchPlane(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range hbAgents * perAgent / benchWidth {
		if _, err := p.store.TriggerRun(ctx, "wide"); err != nil {
			b.Fatal(err)
		}
	}
	type hbAgent struct {
		id      int64
		cred    string
		entries []protocol.HeartbeatEntry
	}
	agents := make([]hbAgent, hbAgents)
	for i := range agents {
		reg, err := p.store.Register(ctx, store.Registration{Name: fmt.Sprintf("hb-%d", i), Capacity: perAgent})
		if err != nil {
			b.Fatal(err)
		}
		agents[i] = hbAgent{id: reg.AgentID, cred: reg.Credential}
		for len(agents[i].entries) < perAgent {
			tasks, err := p.store.Claim(ctx, reg.AgentID, perAgent-len(agents[i].entries))
			if err != nil {
				b.Fatal(err)
			}
			for _, t := range tasks {
				agents[i].entries = append(agents[i].entries, protocol.HeartbeatEntry{
					Attempt: protocol.Attempt{TIID: t.TIID, AttemptID: t.AttemptID}, Started: true})
			}
			if len(tasks) == 0 {
				time.Sleep(20 * time.Millisecond) // the scheduler is still queueing
			}
		}
	}
	bulkCtx, stopBulk := context.WithCancel(ctx)
	var bulk sync.WaitGroup
	var mu sync.Mutex
	completed := 0
	for i := range benchAgents {
		bulk.Go(func() {
			_ = p.runAgent(bulkCtx, fmt.Sprintf("bulk-%d", i), completeBatch, func(n int) {
				mu.Lock()
				completed += n
				mu.Unlock()
			})
		})
	}
	for range bulkRuns {
		if _, err := p.store.TriggerRun(ctx, "wide"); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	var lat []time.Duration
	var hbs sync.WaitGroup
	for _, a := range agents {
		hbs.Go(func() {
			var mine []time.Duration
			for {
				mu.Lock()
				done := completed >= bulkRuns*benchWidth
				mu.Unlock()
				if done || bulkCtx.Err() != nil {
					break
				}
				t0 := time.Now()
				var resp protocol.HeartbeatResponse
				if err := p.post(ctx, fmt.Sprintf("/v1/agents/%d/heartbeat", a.id), a.cred,
					protocol.HeartbeatRequest{Entries: a.entries}, &resp); err != nil {
					b.Error(err)
					break
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	hbs.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	stopBulk()
	bulk.Wait()
	if len(lat) == 0 {
		b.Fatal("no heartbeat was measured")
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat)*perAgent)/elapsed.Seconds(), "TI-heartbeats/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(bulkRuns*benchWidth)/elapsed.Seconds(), "bulk-TIs/s")
}

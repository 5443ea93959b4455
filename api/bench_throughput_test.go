package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/scheduler"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// Throughput of the agent protocol end to end: a real control plane (the
// scheduler leading, the API over HTTP) and synthetic agents that
// complete each claimed TI at once, no process spawned. Each iteration
// triggers one run of a 1,000-task wide DAG and waits until the agents
// have completed all of it; the figure is TIs/s. Run with
//
//	go test -run '^$' -bench NoopThroughput -benchtime 5x ./api/
const (
	benchWidth    = 1000
	benchAgents   = 4
	benchCapacity = 32
)

// benchPlane is the control plane of the throughput benchmark.
type benchPlane struct {
	url   string
	store *store.Store
	hc    *http.Client
}

func newBenchPlane(b *testing.B) *benchPlane {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, storetest.DB(b))
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	m := metrics.New()
	lis := st.Listen(ctx, log, store.ChanScheduler, store.ChanQueued)
	sched, err := scheduler.New(scheduler.Config{Store: st, Listener: lis, Metrics: m, Logger: log, Interval: 50 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	el := leader.NewStatic(st, "bench", log, m)
	srv, err := api.New(api.Config{Store: st, Listener: lis, Metrics: m, Logger: log,
		AgentToken: agentToken, OperatorToken: opToken, Control: sched, LeaderStatus: el.Status})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = el.Run(ctx, leader.Callbacks{OnStartedLeading: sched.Lead})
	}()
	b.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cancel()
		<-done
		lis.Close()
		st.Close()
	})
	spec, err := dag.Parse([]byte(storetest.WideDAGYAML("wide", benchWidth)))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.ApplyDAG(ctx, spec); err != nil {
		b.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 4 * benchAgents}
	b.Cleanup(tr.CloseIdleConnections)
	return &benchPlane{url: hs.URL, store: st, hc: &http.Client{Transport: tr}}
}

// post sends an agent request and decodes a 200 reply into out.
func (p *benchPlane) post(ctx context.Context, path, cred string, body, out any) error {
	buf, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+path, bytes.NewReader(buf))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+agentToken)
	req.Header.Set(protocol.HeaderAgentCredential, cred)
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// completer sends the completions of one claim: one request each, or one
// batch.
type completer func(ctx context.Context, p *benchPlane, agentID int64, cred string, tasks []protocol.ClaimedTask) error

// completeEach is the single-completion route, one request per TI.
func completeEach(ctx context.Context, p *benchPlane, agentID int64, cred string, tasks []protocol.ClaimedTask) error {
	for _, t := range tasks {
		var resp protocol.CompleteResponse
		if err := p.post(ctx, fmt.Sprintf("/v1/agents/%d/complete", agentID), cred,
			protocol.CompleteRequest{Attempt: t.Attempt, Outcome: state.OutcomeSuccess}, &resp); err != nil {
			return err
		}
	}
	return nil
}

// completeBatch is the batch route, one request per claim.
func completeBatch(ctx context.Context, p *benchPlane, agentID int64, cred string, tasks []protocol.ClaimedTask) error {
	if len(tasks) == 0 {
		return nil
	}
	req := protocol.CompleteBatchRequest{}
	for _, t := range tasks {
		req.Completions = append(req.Completions, protocol.CompleteRequest{Attempt: t.Attempt, Outcome: state.OutcomeSuccess})
	}
	var resp protocol.CompleteBatchResponse
	if err := p.post(ctx, fmt.Sprintf("/v1/agents/%d/completions", agentID), cred, req, &resp); err != nil {
		return err
	}
	for _, r := range resp.Results {
		if r.Error != nil {
			return fmt.Errorf("completion of TI %d: %s", r.TIID, r.Error.Message)
		}
	}
	return nil
}

// runAgent claims and completes until ctx ends, counting completions.
func (p *benchPlane) runAgent(ctx context.Context, name string, complete completer, done func(int)) error {
	reg, err := p.store.Register(ctx, store.Registration{Name: name, Capacity: benchCapacity})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		var resp protocol.ClaimResponse
		err := p.post(ctx, fmt.Sprintf("/v1/agents/%d/claim", reg.AgentID), reg.Credential,
			protocol.ClaimRequest{Slots: benchCapacity, Wait: protocol.Duration(time.Second)}, &resp)
		if err != nil {
			return err
		}
		if err := complete(ctx, p, reg.AgentID, reg.Credential, resp.Tasks); err != nil {
			return err
		}
		done(len(resp.Tasks))
	}
	return nil
}

func benchNoop(b *testing.B, complete completer) {
	p := newBenchPlane(b)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	completed := 0
	var wg sync.WaitGroup
	errs := make(chan error, benchAgents)
	for i := 0; i < benchAgents; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.runAgent(ctx, fmt.Sprintf("bench-%d", i), complete, func(n int) {
				mu.Lock()
				completed += n
				cond.Broadcast()
				mu.Unlock()
			})
			if err != nil && ctx.Err() == nil {
				errs <- err
				mu.Lock()
				completed = -1 << 40 // wake the waiter; the error is reported below
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := p.store.TriggerRun(ctx, "wide"); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		for completed >= 0 && completed < (i+1)*benchWidth {
			cond.Wait()
		}
		mu.Unlock()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	b.ReportMetric(float64(b.N*benchWidth)/elapsed.Seconds(), "TIs/s")
}

// BenchmarkNoopThroughput: 4 synthetic HTTP agents of capacity 32,
// completing one request per TI (single) or one per claim (batch).
func BenchmarkNoopThroughput(b *testing.B) {
	b.Run("single", func(b *testing.B) { benchNoop(b, completeEach) })
	b.Run("batch", func(b *testing.B) { benchNoop(b, completeBatch) })
}

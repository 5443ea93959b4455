package main

// Synthetic agents: they speak the agent protocol (api/protocol,
// docs/design.md §4) over HTTP like `vigil agent`, but never spawn a
// process: every claimed TI is completed at once with exit code 0, and
// what is in flight is heartbeated at the interval the server asks for.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	vagent "github.com/vigil-sched/vigil/agent"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// apiClient sends agent requests to one server with the shared agent token.
type apiClient struct {
	base, token string
	hc          *http.Client
}

func newAPIClient(base, token string, conns int) *apiClient {
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
	return &apiClient{base: base, token: token, hc: &http.Client{Transport: tr, Timeout: time.Minute}}
}

// post sends in as JSON and decodes a 2xx reply into out (nil: discard).
// A reply outside 2xx is an error carrying the status and body.
func (c *apiClient) post(ctx context.Context, path, credential string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if credential != "" {
		req.Header.Set(protocol.HeaderAgentCredential, credential)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// agent is one registered synthetic agent.
type agent struct {
	c          *apiClient
	id         int64
	credential string
	interval   time.Duration // heartbeat interval the server asked for
	capacity   int

	mu       sync.Mutex
	inFlight map[int64]protocol.HeartbeatEntry // by TI id: claimed, completion not yet accepted
	freed    chan struct{}                     // signalled after a completion frees slots
	// slots says when to claim: `vigil agent`'s own rule
	// (agent.SlotWait), its Window set by startFleet (-claim-window).
	slots vagent.SlotWait

	completed atomic.Int64
	// claims counts claim requests that returned TIs; asked and got sum
	// their slots and TIs (the claim window's effect on round size).
	claims, asked, got atomic.Int64
}

// register registers a synthetic agent offering tags. inFlight are
// attempts it already holds (an agent reconnecting): they are heartbeated
// from then on.
func register(ctx context.Context, c *apiClient, name string, tags []string, capacity int, inFlight []protocol.HeartbeatEntry) (*agent, error) {
	var resp protocol.RegisterResponse
	if inFlight == nil {
		inFlight = []protocol.HeartbeatEntry{}
	}
	req := protocol.RegisterRequest{Name: name, Tags: tags, Capacity: capacity, InFlight: inFlight}
	if err := c.post(ctx, "/v1/agents/register", "", req, &resp); err != nil {
		return nil, fmt.Errorf("register %s: %w", name, err)
	}
	a := &agent{c: c, id: resp.AgentID, credential: resp.Credential, interval: resp.HeartbeatInterval.D(),
		capacity: capacity, inFlight: map[int64]protocol.HeartbeatEntry{}, freed: make(chan struct{}, 1)}
	for _, h := range inFlight {
		a.inFlight[h.TIID] = h
	}
	a.slots = vagent.SlotWait{Capacity: capacity, Free: a.free, Freed: a.freed}
	return a, nil
}

// free is the number of slots not held by a claimed TI whose completion
// is not yet accepted, as `vigil agent` counts them.
func (a *agent) free() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.capacity - len(a.inFlight)
}

func (a *agent) path(verb string) string { return fmt.Sprintf("/v1/agents/%d/%s", a.id, verb) }

// heartbeat reports entries in one request.
func (a *agent) heartbeat(ctx context.Context, entries []protocol.HeartbeatEntry) error {
	return a.c.post(ctx, a.path("heartbeat"), a.credential, protocol.HeartbeatRequest{Entries: entries}, nil)
}

// deregister removes the agent (its in-flight work, if any, is handled by
// the server as an ephemeral agent's).
func (a *agent) deregister(ctx context.Context) error {
	return a.c.post(ctx, a.path("deregister"), a.credential, struct{}{}, nil)
}

// work claims and completes until ctx ends, with at most completers
// completion requests in flight, and heartbeats what it holds every
// interval. It returns the first error other than ctx ending.
//
// Every TI of one claim ends at once, so the agent completes them in one
// batch (POST /v1/agents/{id}/completions), as `vigil agent` batches the
// completions that end within a few milliseconds of each other.
func (a *agent) work(ctx context.Context, completers int) error {
	wctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	batches := make(chan []protocol.Attempt, completers)
	var wg sync.WaitGroup
	for range completers {
		wg.Go(func() {
			for b := range batches {
				if err := a.complete(wctx, b); err != nil {
					stop(err)
					return
				}
			}
		})
	}
	wg.Go(func() { a.heartbeatLoop(wctx) })
	err := a.claimLoop(wctx, batches)
	close(batches)
	stop(err)
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return context.Cause(wctx)
}

// claimLoop long-polls for the free slots when a.slots says to claim
// (all of them once half are free, else the claim window after the
// first) and hands each claim's TIs to a completer, until ctx ends.
func (a *agent) claimLoop(ctx context.Context, batches chan<- []protocol.Attempt) error {
	for {
		free, ok := a.slots.Wait(ctx)
		if !ok {
			return nil
		}
		var resp protocol.ClaimResponse
		req := protocol.ClaimRequest{Slots: free, Wait: protocol.Duration(time.Second)}
		if err := a.c.post(ctx, a.path("claim"), a.credential, req, &resp); err != nil {
			return err
		}
		if len(resp.Tasks) == 0 {
			continue
		}
		a.claims.Add(1)
		a.asked.Add(int64(free))
		a.got.Add(int64(len(resp.Tasks)))
		batch := make([]protocol.Attempt, len(resp.Tasks))
		a.mu.Lock()
		for i, t := range resp.Tasks {
			a.inFlight[t.TIID] = protocol.HeartbeatEntry{Attempt: t.Attempt, Started: true}
			batch[i] = t.Attempt
		}
		a.mu.Unlock()
		select {
		case batches <- batch:
		case <-ctx.Done():
			return nil
		}
	}
}

// complete reports the batch as successes with exit code 0 (in requests
// of at most protocol.MaxCompletionBatch) and frees their slots. Any
// refused item is an error: nothing in the bench makes an attempt stale.
func (a *agent) complete(ctx context.Context, batch []protocol.Attempt) error {
	zero := 0
	for len(batch) > 0 {
		part := batch[:min(len(batch), protocol.MaxCompletionBatch)]
		batch = batch[len(part):]
		req := protocol.CompleteBatchRequest{Completions: make([]protocol.CompleteRequest, len(part))}
		for i, t := range part {
			req.Completions[i] = protocol.CompleteRequest{Attempt: t, Outcome: state.OutcomeSuccess, ExitCode: &zero}
		}
		var resp protocol.CompleteBatchResponse
		if err := a.c.post(ctx, a.path("completions"), a.credential, req, &resp); err != nil {
			return err
		}
		if len(resp.Results) != len(part) {
			return fmt.Errorf("completions: %d results for %d items", len(resp.Results), len(part))
		}
		for _, r := range resp.Results {
			if r.Error != nil {
				return fmt.Errorf("completion of TI %d refused: %s: %s", r.TIID, r.Error.Code, r.Error.Message)
			}
		}
		// One slot at a time, as `vigil agent` frees them: each of its
		// tasks learns its item's result in its own goroutine. A claim
		// loop without a window wakes at the first and claims what is
		// free by then.
		for _, t := range part {
			a.mu.Lock()
			delete(a.inFlight, t.TIID)
			a.mu.Unlock()
			a.completed.Add(1)
			select { // wake the claim loop; one pending wake-up is enough
			case a.freed <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

// heartbeatLoop reports every held attempt each interval (a claimed TI as
// started: a synthetic agent has nothing to start).
func (a *agent) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(a.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.mu.Lock()
		entries := make([]protocol.HeartbeatEntry, 0, len(a.inFlight))
		for _, h := range a.inFlight {
			entries = append(entries, h)
		}
		a.mu.Unlock()
		if len(entries) > 0 {
			_ = a.heartbeat(ctx, entries) // a missed heartbeat is retried at the next interval, as by vigil agent
		}
	}
}

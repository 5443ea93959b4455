package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/outputs"
)

// completionWindow is how long the first completion of a batch waits for
// others to join it: completions that end within it, or while the
// previous batch is in flight, travel in one request (docs/design.md §4
// complete; adr/0018).
const completionWindow = 2 * time.Millisecond

// maxBatchOutputBytes bounds the outputs (keys and values) of one batch,
// so that a batch of completions that carry outputs stays well within the
// server's 40 MiB request body even when JSON escapes every byte (six
// bytes for a control character); a batch always takes its first item.
const maxBatchOutputBytes = 4 << 20

// batchItem is one completion waiting for a batch; done receives nil once
// the server answered for it (accepted, stale or rejected: the answer is
// logged), or the error that needs a reconnect.
type batchItem struct {
	pc   pendingCompletion
	conn conn
	done chan error
}

// sendBatched delivers pc with the completions that end about when it
// does (POST /v1/agents/{id}/completions), and returns what
// sendCompletion would: nil once the server has answered for it, or an
// error that needs a reconnect. The first item of a batch starts its
// sender; items arriving while a batch is in flight form the next.
func (a *Agent) sendBatched(ctx context.Context, c conn, pc pendingCompletion) error {
	if a.noBatch.Load() {
		return a.sendCompletion(ctx, c, pc, true)
	}
	it := &batchItem{pc: pc, conn: c, done: make(chan error, 1)}
	a.batchMu.Lock()
	a.batch = append(a.batch, it)
	start := !a.batchSending
	a.batchSending = true
	a.batchMu.Unlock()
	if start {
		go a.flushCompletions(ctx)
	}
	return <-it.done
}

// flushCompletions sends the queued completions, one request per link
// generation and at most protocol.MaxCompletionBatch (and
// maxBatchOutputBytes of outputs) at a time, until the queue is empty.
func (a *Agent) flushCompletions(ctx context.Context) {
	time.Sleep(completionWindow)
	for {
		a.batchMu.Lock()
		if len(a.batch) == 0 {
			a.batchSending = false
			a.batchMu.Unlock()
			return
		}
		var take []*batchItem
		take, a.batch = nextBatch(a.batch)
		a.batchMu.Unlock()
		a.postBatch(ctx, take)
	}
}

// nextBatch splits a non-empty queue into the next batch and the rest:
// the items of the first item's link generation, in order, at most
// protocol.MaxCompletionBatch of them and maxBatchOutputBytes of outputs
// (the first item always goes).
func nextBatch(queue []*batchItem) (take, keep []*batchItem) {
	gen := queue[0].conn.gen
	size := 0
	for _, it := range queue {
		n := outputs.Size(it.pc.req.Outputs)
		if it.conn.gen == gen && len(take) < protocol.MaxCompletionBatch && (len(take) == 0 || size+n <= maxBatchOutputBytes) {
			take = append(take, it)
			size += n
		} else {
			keep = append(keep, it)
		}
	}
	return take, keep
}

// postBatch sends one batch and answers each item. A server without the
// batch route (404 "no route") makes the agent send one at a time from
// then on.
func (a *Agent) postBatch(ctx context.Context, items []*batchItem) {
	c := items[0].conn
	req := protocol.CompleteBatchRequest{Completions: make([]protocol.CompleteRequest, len(items))}
	for i, it := range items {
		req.Completions[i] = it.pc.req
	}
	var resp protocol.CompleteBatchResponse
	url := fmt.Sprintf("%s/v1/agents/%d/completions", c.base, c.agentID)
	err := a.cl.post(ctx, "completions", url, a.timeout(), req, &resp)
	if err == nil && len(resp.Results) != len(items) {
		err = fmt.Errorf("completions: %d results for %d completions", len(resp.Results), len(items))
	}
	switch {
	case err == nil:
		for i, it := range items {
			if r := resp.Results[i]; r.Error != nil && r.Error.Code == protocol.CodeInternal {
				// The server failed this item (its database went away
				// mid-request): what a 5xx is on the single route, so the
				// completion is buffered and replayed, never dropped.
				it.done <- &APIError{Op: "completions", Status: http.StatusInternalServerError, Code: r.Error.Code, Message: r.Error.Message}
				continue
			}
			a.completionResult(it.pc, resp.Results[i])
			it.done <- nil
		}
	case routeMissing(err):
		a.noBatch.Store(true)
		a.log.Warn("the control plane has no batch completion route; sending completions one at a time", "err", err)
		for _, it := range items {
			it.done <- a.sendCompletion(ctx, it.conn, it.pc, true)
		}
	case needsReconnect(err):
		for _, it := range items {
			it.done <- err
		}
	default:
		for _, it := range items {
			it.pc.log.Error("completion rejected; dropped", "outcome", it.pc.req.Outcome, "err", err)
			it.done <- nil
		}
	}
}

// completionResult logs one item's answer and, for a stale attempt, kills
// what is left of its process group, as sendCompletion does.
func (a *Agent) completionResult(pc pendingCompletion, r protocol.CompletionResult) {
	if r.Error == nil {
		pc.log.Debug("completion delivered", "outcome", pc.req.Outcome, "state", r.State)
		return
	}
	err := &APIError{Op: "completions", Status: http.StatusOK, Code: r.Error.Code, Message: r.Error.Message}
	if r.Error.Code == protocol.CodeStaleAttempt {
		pc.log.Warn("completion refused: attempt no longer current; dropped", "err", err)
		if pc.pgid > 0 {
			a.goKillGroup(pc.pgid, pc.log)
		}
		return
	}
	pc.log.Error("completion rejected; dropped", "outcome", pc.req.Outcome, "err", err)
}

// routeMissing reports the 404 of a server that does not know the route
// (older than the batch route: Vigil's "no route for", or a bare 404 that
// is no protocol error), as opposed to an unknown agent.
func routeMissing(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound &&
		(ae.Code == "" || strings.HasPrefix(ae.Message, "no route for "))
}

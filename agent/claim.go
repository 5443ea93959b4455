package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/vigil-sched/vigil/api/protocol"
)

// claimLoop long-polls for work while there are free slots, until ctx is
// done (docs/design.md §4 claim); a.slots says when slots freed by
// completions have gathered enough for one round (Config.ClaimWindow). Tasks it starts use taskCtx for their network
// calls, so they outlive ctx during the drain. Failures back off, so a
// control plane that registers but fails claims is not hammered.
func (a *Agent) claimLoop(ctx, taskCtx context.Context) {
	bo := a.newBackoff()
	for {
		c, err := a.waitUp(ctx)
		if err != nil {
			return
		}
		free, ok := a.slots.Wait(ctx)
		if !ok {
			return
		}
		tasks, err := a.claim(ctx, c, free)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, errClaimSuperseded) {
				continue // the link went down meanwhile: wait for the next one
			}
			if needsReconnect(err) {
				a.linkFailed(c, err)
			} else {
				a.log.Error("claim rejected", "err", err)
			}
			if !sleepCtx(ctx, bo.Next()) {
				return
			}
			continue
		}
		bo.Reset()
		if len(tasks) > free {
			a.log.Warn("server handed out more tasks than free slots; running them all", "free", free, "claimed", len(tasks))
		}
		for _, t := range tasks {
			a.launch(taskCtx, t)
		}
	}
}

// errClaimSuperseded marks a claim cancelled because its registration
// failed while it waited (claimContext): not an error of the claim itself.
var errClaimSuperseded = errors.New("claim cancelled: the link it was made on went down")

// freeSlots is the number of slots neither running an attempt nor
// holding one whose completion the server has not acknowledged.
func (a *Agent) freeSlots() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.Capacity - len(a.attempts) - len(a.reporting)
}

func (a *Agent) claim(ctx context.Context, c conn, slots int) ([]protocol.ClaimedTask, error) {
	req := protocol.ClaimRequest{Slots: slots, Wait: protocol.Duration(a.cfg.ClaimWait)}
	var resp protocol.ClaimResponse
	url := fmt.Sprintf("%s/v1/agents/%d/claim", c.base, c.agentID)
	cctx, cancel := a.claimContext(ctx, c.gen)
	defer cancel()
	if err := a.cl.post(cctx, "claim", url, a.cfg.ClaimWait+a.timeout(), req, &resp); err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("%w: %w", errClaimSuperseded, err)
		}
		return nil, err
	}
	return resp.Tasks, nil
}

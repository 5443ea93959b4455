package agent

import (
	"log/slog"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// Found by the chaos suite (docs/reliability.md): an agent resumed from a
// SIGSTOP longer than the agent-lost threshold; its first heartbeat's
// reply ordered the reaped attempt stopped just as the task exited 0 on
// its own, before the agent had seen the exit. The stop suppressed the
// completion, so a success was lost although the control plane would
// have recorded it late. A process that exited 0 by itself now reports
// its success even after a stop order; one the stop killed does not.
func TestStopOrderRacingAnExitZeroKeepsTheSuccess(t *testing.T) {
	a := &Agent{log: slog.New(slog.DiscardHandler)}
	att := &attempt{task: protocol.ClaimedTask{Attempt: protocol.Attempt{TIID: 7, AttemptID: "a"}, TryNumber: 1},
		log: slog.New(slog.DiscardHandler), cause: causeStop, stopped: true, stopReason: string(state.StopReaped)}

	exit0 := syscall.WaitStatus(0) // exited, status 0
	r := a.outcome(att, nil, &exit0)
	require.False(t, r.suppress, "an exit 0 that beat the kill is reported")
	assert.Equal(t, state.OutcomeSuccess, r.req.Outcome)
	require.NotNil(t, r.req.ExitCode)
	assert.Equal(t, 0, *r.req.ExitCode)

	killed := syscall.WaitStatus(syscall.SIGTERM) // terminated by the stop's SIGTERM
	assert.True(t, a.outcome(att, nil, &killed).suppress, "a process the stop killed sends nothing")
	exit1 := syscall.WaitStatus(1 << 8) // exited, status 1
	assert.True(t, a.outcome(att, nil, &exit1).suppress, "a failure after a stop order is not sent")
	assert.True(t, a.outcome(att, nil, nil).suppress, "no status: nothing to report")
}

package reaper

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// The boundaries of the decisions that need no database, each pinned on
// both sides: the mutation run (docs/reliability.md, "Mutation score")
// found them unguarded.

// TestGraceNoticeStallCheckBoundaries: a sweep whose clock reading is
// exactly MaxGap past the leader's last stall check is not stalled; one
// a nanosecond later is. A zero MaxGap disables the check whatever the gap.
func TestGraceNoticeStallCheckBoundaries(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	th := Thresholds{AgentLost: 90 * time.Second}
	term := Term{GraceStart: t0.Add(-time.Hour), CheckedAt: t0, MaxGap: 2 * time.Second}

	assert.Empty(t, graceNotice(state.ReaperAgentLost, t0.Add(time.Second), term, th), "a gap under MaxGap")
	assert.Empty(t, graceNotice(state.ReaperAgentLost, t0.Add(2*time.Second), term, th), "a gap of exactly MaxGap")
	assert.Contains(t, graceNotice(state.ReaperAgentLost, t0.Add(2*time.Second+time.Nanosecond), term, th),
		"holding back: 2s passed since the leader last checked for a stall (limit 2s)", "a gap past MaxGap")

	term.MaxGap = 0
	assert.Empty(t, graceNotice(state.ReaperAgentLost, t0.Add(time.Hour), term, th), "MaxGap 0 disables the stall check")
}

// TestGraceNoticeEndsAtExactlyTheThreshold: the post-leadership grace
// lasts the agent-lost threshold and not a nanosecond more.
func TestGraceNoticeEndsAtExactlyTheThreshold(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	th := Thresholds{AgentLost: 90 * time.Second}
	term := Term{GraceStart: t0}

	assert.Contains(t, graceNotice(state.ReaperAgentLost, t0.Add(th.AgentLost-time.Nanosecond), term, th),
		"in post-leadership grace", "a nanosecond before the threshold")
	assert.Empty(t, graceNotice(state.ReaperAgentLost, t0.Add(th.AgentLost), term, th), "at exactly the threshold")
}

// TestLostAttemptCountsDispatchAttempts: a never-started attempt is
// requeued, naming the attempt it was (the listed count plus this one),
// until the MaxDispatchAttempts-th, which fails dispatch_lost.
func TestLostAttemptCountsDispatchAttempts(t *testing.T) {
	agent := int64(7)
	c := store.StaleRunning{TIID: 1, RunID: 2, TaskID: "t", TryNumber: 1, AgentID: &agent}

	c.DispatchAttempts = 0
	r := LostAttempt(c, "silent")
	assert.True(t, r.Requeue)
	assert.Equal(t, state.TIScheduled, r.State)
	assert.Equal(t, state.EventAgentLostRequeued, r.EventKind)
	assert.Equal(t, "silent before the task started; requeued without spending a retry (dispatch attempt 1 of 5)", r.Message)

	c.DispatchAttempts = MaxDispatchAttempts - 2
	r = LostAttempt(c, "silent")
	assert.True(t, r.Requeue, "attempt %d of %d is requeued", MaxDispatchAttempts-1, MaxDispatchAttempts)
	assert.Contains(t, r.Message, "(dispatch attempt 4 of 5)")

	c.DispatchAttempts = MaxDispatchAttempts - 1
	r = LostAttempt(c, "silent")
	assert.False(t, r.Requeue, "the last attempt is not requeued")
	assert.Equal(t, state.TIFailed, r.State)
	assert.Equal(t, state.ReasonDispatchLost, r.Reason)
	assert.Equal(t, "silent and the task never started; dispatched 5 times without starting, giving up", r.Message)
}

// TestAgentName: a TI whose agent row was pruned has no agent id.
func TestAgentName(t *testing.T) {
	id := int64(42)
	assert.Equal(t, "42", agentName(&id))
	assert.Equal(t, "(unknown)", agentName(nil))
}

// TestNearingBoundaries: a run is nearing its timeout once its time left
// is at most a quarter of its timeout, and never more than RunHorizon.
func TestNearingBoundaries(t *testing.T) {
	assert.True(t, nearing(10*time.Minute, 150*time.Second), "exactly a quarter of a 10m timeout")
	assert.False(t, nearing(10*time.Minute, 150*time.Second+time.Nanosecond), "just over a quarter")
	assert.True(t, nearing(2*time.Hour, RunHorizon), "exactly RunHorizon left of a 2h timeout")
	assert.False(t, nearing(2*time.Hour, RunHorizon+time.Nanosecond), "just over RunHorizon")
	assert.True(t, nearing(10*time.Minute, 0), "past its deadline")
}

// TestRenameFields: threshold errors are renamed field by field; nil and
// errors holding no *FieldError pass through untouched.
func TestRenameFields(t *testing.T) {
	name := func(f string) string { return "--" + f }
	assert.NoError(t, RenameFields(nil, name))
	plain := errors.New("not a threshold error")
	assert.Same(t, plain, RenameFields(plain, name))

	err := Thresholds{AgentLost: 10 * time.Second, DispatchLost: time.Minute, Orphan: time.Minute}.Validate(15 * time.Second)
	require.Error(t, err)
	assert.EqualError(t, RenameFields(err, name),
		"--AgentLost: 10s must be at least 2 × the heartbeat interval (15s), i.e. ≥ 30s")
}

// TestValidateThresholdBounds: each bound is inclusive, a nanosecond past
// it is refused naming the field, and the two-heartbeat rule applies only
// with a heartbeat interval, at exactly twice it included.
func TestValidateThresholdBounds(t *testing.T) {
	fields := func(err error) []string {
		var out []string
		for _, fe := range FieldErrors(err) {
			out = append(out, fe.Field)
		}
		return out
	}
	assert.NoError(t, Thresholds{AgentLost: MinThreshold, DispatchLost: MinThreshold, Orphan: MinThreshold}.Validate(0))
	assert.NoError(t, Thresholds{AgentLost: MaxAgentLostThreshold, DispatchLost: MaxOtherThreshold, Orphan: MaxOtherThreshold}.Validate(0))

	err := Thresholds{AgentLost: MinThreshold - 1, DispatchLost: MinThreshold - 1, Orphan: MinThreshold - 1}.Validate(0)
	assert.Equal(t, []string{FieldAgentLost, FieldDispatchLost, FieldOrphan}, fields(err))
	assert.ErrorContains(t, err, "AgentLost: 999.999999ms is outside 1s..2h0m0s")
	err = Thresholds{AgentLost: MaxAgentLostThreshold + 1, DispatchLost: MaxOtherThreshold + 1, Orphan: MaxOtherThreshold + 1}.Validate(0)
	assert.Equal(t, []string{FieldAgentLost, FieldDispatchLost, FieldOrphan}, fields(err))
	assert.ErrorContains(t, err, "DispatchLost: 24h0m0.000000001s is outside 1s..24h0m0s")

	ok := Thresholds{AgentLost: 30 * time.Second, DispatchLost: time.Minute, Orphan: time.Minute}
	assert.NoError(t, ok.Validate(15*time.Second), "exactly twice the heartbeat interval")
	short := ok
	short.AgentLost = 30*time.Second - 1
	err = short.Validate(15 * time.Second)
	assert.Equal(t, []string{FieldAgentLost}, fields(err))
	assert.ErrorContains(t, err, "must be at least 2 × the heartbeat interval (15s), i.e. ≥ 30s")
	assert.NoError(t, short.Validate(0), "no heartbeat interval, no heartbeat rule")
	negative := ok
	negative.AgentLost = -time.Second
	assert.Equal(t, []string{FieldAgentLost}, fields(negative.Validate(0)), "out of bounds only: no heartbeat rule without an interval")
}

package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/reaper/reapertest"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// stallSetup is a stall detector of epoch 7 with a one-second gap limit,
// reading clock, and the last term it set.
func stallSetup(t *testing.T, clock reaper.Clock) (*stallDetector, func() *reaper.Term) {
	t.Helper()
	var last *reaper.Term
	d := newStallDetector(stallConfig{Epoch: 7, GapLimit: time.Second, Clock: clock,
		SetTerm: func(t *reaper.Term) { last = t }}, slog.New(slog.DiscardHandler))
	require.NoError(t, d.start(context.Background()))
	return d, func() *reaper.Term { return last }
}

// On the database clock: start sets the term's first grace start, and a
// reading within the gap limit moves CheckedAt only.
func TestStallPassOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.DB(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	cc := st.ClockConn()
	t.Cleanup(cc.Close)
	d, term := stallSetup(t, cc)
	first := *term()
	assert.Equal(t, int64(7), first.Epoch)
	assert.Equal(t, time.Second, first.MaxGap)
	assert.Equal(t, first.GraceStart, first.CheckedAt)

	require.NoError(t, d.runOnce(ctx))
	next := *term()
	assert.Equal(t, first.GraceStart, next.GraceStart, "a prompt reading keeps the grace")
	assert.False(t, next.CheckedAt.Before(first.CheckedAt))
	assert.Less(t, d.silence(), time.Minute)
}

// A gap beyond the limit, or a failed reading, restarts the grace at the
// next good reading; readings within the limit do not.
func TestStallPassRestartsTheGraceAfterAGapOrAFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := reapertest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	d, term := stallSetup(t, clock)
	grace := term().GraceStart

	clock.Add(time.Second) // exactly the limit
	require.NoError(t, d.runOnce(ctx))
	assert.Equal(t, grace, term().GraceStart)

	clock.Add(time.Second + time.Millisecond) // a paused process or database
	require.NoError(t, d.runOnce(ctx))
	assert.Equal(t, term().CheckedAt, term().GraceStart, "the grace restarts at the late reading")
	grace = term().GraceStart

	clock.Fail(errors.New("database unreachable (test)"))
	require.Error(t, d.runOnce(ctx))
	assert.Equal(t, grace, term().GraceStart, "a failed reading sets no term")
	clock.Fail(nil)
	clock.Add(100 * time.Millisecond)
	require.NoError(t, d.runOnce(ctx))
	assert.True(t, term().GraceStart.After(grace), "the first good reading after a failure restarts the grace")

	assert.Equal(t, 250*time.Millisecond, d.cfg.Every, "default: a quarter of the gap limit, at most 1 s")
}

package controlplane

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWaitForDatabase: unavailable tries are repeated until one succeeds,
// a permanent error ends the wait at its first try, 0 tries once, and the
// bound ends it with a FieldError of Wait that a caller can name its way.
func TestWaitForDatabase(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	unavailable := errors.Join(errors.New("dial"), syscall.ECONNREFUSED)

	tries := 0
	err := waitForDatabase(ctx, log, time.Minute, func(context.Context) error {
		if tries++; tries < 3 {
			return unavailable
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, tries)

	tries = 0
	permanent := &pgconn.PgError{Code: "42601", Message: "syntax error"}
	err = waitForDatabase(ctx, log, time.Minute, func(context.Context) error { tries++; return permanent })
	assert.ErrorIs(t, err, permanent)
	assert.Equal(t, 1, tries)

	tries = 0
	err = waitForDatabase(ctx, log, 0, func(context.Context) error { tries++; return unavailable })
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.Equal(t, 1, tries)

	err = waitForDatabase(ctx, log, 300*time.Millisecond, func(context.Context) error { return unavailable })
	require.Error(t, err)
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "Wait", fe.Field)
	assert.Contains(t, err.Error(), "database still unreachable after Wait 300ms")
	assert.Contains(t, fe.Named("--database-wait"), "database still unreachable after --database-wait 300ms")
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)

	cctx, cancel := context.WithCancel(ctx)
	err = waitForDatabase(cctx, log, time.Hour, func(context.Context) error { cancel(); return unavailable })
	assert.ErrorIs(t, err, context.Canceled, "a signal ends the wait at once")
}

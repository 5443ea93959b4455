//go:build vigil_testhooks

package store

import (
	"context"
	"os"
	"sync"

	"github.com/vigil-sched/vigil/internal/testhook"
)

// envHold is the process's one HoldLeaderTx hook from the environment,
// shared by every Store it opens so that it fires once per process.
var envHold = sync.OnceValue(func() func(ctx context.Context, tx Tx, epoch int64) (bool, error) {
	if marker := os.Getenv(testhook.EnvHoldLeaderTx); marker != "" {
		return testhook.HoldLeaderTx(marker)
	}
	return nil
})

// testSignalsFromEnv adds to ts the hooks the environment switches on, in
// a vigil built with -tags vigil_testhooks (testhook.Tag) for the e2e
// tests only: testhook.EnvHoldLeaderTx and testhook.EnvHoldDelivery.
func testSignalsFromEnv(ts TestSignals) TestSignals {
	if ts.HoldLeaderTx == nil {
		ts.HoldLeaderTx = envHold()
	}
	if marker := os.Getenv(testhook.EnvHoldDelivery); marker != "" && ts.NotificationsDue == nil {
		ts.NotificationsDue = testhook.HoldDelivery(marker)
	}
	return ts
}

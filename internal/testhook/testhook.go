// Package testhook holds the test hooks that e2e tests switch on in a real
// vigil process. It is linked only into test binaries and into a vigil
// built with the build tag Tag (store/testhook_on.go reads the
// environment there); the shipped binary has neither this package nor
// the environment variables' meaning.
package testhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Tag is the build tag that compiles the environment hooks into vigil:
// go build -tags vigil_testhooks ./cmd/vigil.
const Tag = "vigil_testhooks"

// EnvHoldLeaderTx names the environment variable that, in a vigil built
// with Tag, installs HoldLeaderTx(its value) as the store's
// TestSignals.HoldLeaderTx.
const EnvHoldLeaderTx = "VIGIL_TESTHOOK_HOLD_LEADER_TX"

// DeposedWriteSetting is the settings row HoldLeaderTx tries to write
// after its hold.
const DeposedWriteSetting = "testhook.deposed_write"

// holdMax bounds the hold when the test never releases it.
const holdMax = 60 * time.Second

// HoldLeaderTx returns a store.TestSignals.HoldLeaderTx that turns the
// first fenced leader transaction it sees (and only that one) into a
// frozen leader, for the end-to-end test of a deposed leader
// (e2e/frozen_leader_test.go):
//
//  1. it writes marker ("pid P epoch E"), then
//  2. holds its transaction open, sending nothing, until the test creates
//     <marker>.release (the moment the test chooses, whatever became of
//     the process's leadership meanwhile) or a minute passes, then
//  3. inside that same transaction, with a fresh 10 s context, writes the
//     settings row DeposedWriteSetting and commits, and
//  4. writes the outcome ("committed" or "failed: <error>") to
//     <marker>.result and returns the write's error, if any.
//
// Held past the leader timeouts, the write must fail: PostgreSQL ended
// the idle session. Released sooner, it commits only if the fence still
// held its epoch at the commit: the fence check's row lock keeps a newer
// leader from moving it meanwhile. Every later transaction runs its
// callback as usual.
func HoldLeaderTx(marker string) func(ctx context.Context, tx pgx.Tx, epoch int64) (bool, error) {
	var taken atomic.Bool
	return func(ctx context.Context, tx pgx.Tx, epoch int64) (bool, error) {
		if !taken.CompareAndSwap(false, true) {
			return false, nil
		}
		return true, hold(ctx, tx, epoch, marker)
	}
}

func hold(ctx context.Context, tx pgx.Tx, epoch int64, marker string) error {
	log := slog.Default().With("testhook", EnvHoldLeaderTx, "epoch", epoch)
	if err := writeFileAtomic(marker, fmt.Sprintf("pid %d epoch %d\n", os.Getpid(), epoch)); err != nil {
		return fmt.Errorf("test hook: write marker: %w", err)
	}
	log.Warn("test hook: holding a leader transaction open", "marker", marker, "max", holdMax)
	for deadline := time.Now().Add(holdMax); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(marker + ".release"); err == nil {
			break
		}
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := tx.Exec(wctx, `
		INSERT INTO settings (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()`,
		DeposedWriteSetting, fmt.Sprintf("pid %d epoch %d", os.Getpid(), epoch))
	if err == nil {
		err = tx.Commit(wctx)
	}
	outcome := "committed"
	if err != nil {
		outcome = "failed: " + err.Error()
	}
	log.Warn("test hook: deposed write "+outcome, "ctx_err", ctx.Err())
	if werr := writeFileAtomic(marker+".result", outcome+"\n"); werr != nil {
		err = errors.Join(err, fmt.Errorf("test hook: write result: %w", werr))
	}
	if err != nil {
		return fmt.Errorf("test hook: deposed write: %w", err)
	}
	return nil
}

// writeFileAtomic writes data to path through a temporary file and a
// rename, so that a reader never sees it half written.
func writeFileAtomic(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// EnvHoldDelivery names the environment variable that, in a vigil built
// with Tag, installs HoldDelivery(its value) as the store's
// TestSignals.NotificationsDue.
const EnvHoldDelivery = "VIGIL_TESTHOOK_HOLD_DELIVERY"

// HoldDelivery returns a store.TestSignals.NotificationsDue that holds
// every batch of due notifications the delivery service reads, before it
// posts any, for the end-to-end test of a leader killed between a state
// change and its delivery (e2e/notify_test.go): it writes marker ("pid P
// due N") and waits until <marker>.release exists, its pass's context
// ends (then the pass fails and posts nothing), or a minute passes.
func HoldDelivery(marker string) func(ctx context.Context, n int) error {
	return func(ctx context.Context, n int) error {
		if err := writeFileAtomic(marker, fmt.Sprintf("pid %d due %d\n", os.Getpid(), n)); err != nil {
			return fmt.Errorf("test hook: write marker: %w", err)
		}
		slog.Default().Warn("test hook: holding a notification delivery", "marker", marker, "due", n)
		for deadline := time.Now().Add(holdMax); time.Now().Before(deadline); {
			if _, err := os.Stat(marker + ".release"); err == nil {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("test hook: delivery held: %w", ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
		return nil
	}
}

package main

// The machine's process-start rate, the yardstick of the Lite figures
// (issue 27: Lite at half of it or more): measured in the same run, just
// before Lite, at Lite's concurrency, so that its ratio to the Lite
// burn-down cancels the load the machine happened to carry.

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// startRateFor is how long the process-start rate is measured.
const startRateFor = 5 * time.Second

// startRate starts `true` from workers goroutines for d, each starting
// the next as soon as the last has been waited for, as Lite's slots do,
// and returns the starts completed per second. It fails on the first
// start that fails.
func startRate(ctx context.Context, workers int, d time.Duration) (float64, error) {
	bin, err := exec.LookPath("true")
	if err != nil {
		return 0, fmt.Errorf("process-start rate: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		n     atomic.Int64
		wg    sync.WaitGroup
		first error
		once  sync.Once
	)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := exec.Command(bin).Run(); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if first != nil {
		return 0, fmt.Errorf("process-start rate: %s: %w", bin, first)
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// liteStartRate prints the process-start rate at Lite's concurrency
// (agents × capacity) under the key start_rate, which the Lite burn-down
// is divided by.
func (e *env) liteStartRate(ctx context.Context) error {
	workers := e.cfg.LiteAgents * e.cfg.LiteCapacity
	e.progress("process-start rate", "workers", workers, "for", startRateFor)
	r, err := startRate(ctx, workers, startRateFor)
	if err != nil {
		return err
	}
	e.out.figure("start_rate", fmt.Sprintf("process starts of `true` (%d at once)", workers), r, "starts/s",
		fmt.Sprintf("fork, exec and wait from one Go process for %s; load average %s", startRateFor, loadAverage()))
	return nil
}

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
// (agents × capacity) under key; when says when it was measured.
func (e *env) liteStartRate(ctx context.Context, key, when string) error {
	workers := e.cfg.LiteAgents * e.cfg.LiteCapacity
	e.progress("process-start rate", "workers", workers, "for", startRateFor, "when", when)
	r, err := startRate(ctx, workers, startRateFor)
	if err != nil {
		return err
	}
	e.out.figure(key, fmt.Sprintf("process starts %s (%d `true` at once)", when, workers), r, "starts/s",
		fmt.Sprintf("fork, exec and wait from one Go process for %s; load average %s", startRateFor, loadAverage()))
	return nil
}

// liteStartRatio prints the mean of the start rates measured before and
// after the Lite burn-down (key start_rate: the load of a shared machine
// moves within a minute, and the two bracket the burn-down) and the
// burn-down's ratio to it, issue 27's figure.
func (e *env) liteStartRatio() {
	b, ok1 := e.out.vals["start_rate_before"]
	a, ok2 := e.out.vals["start_rate_after"]
	if ok1 && ok2 {
		e.out.figure("start_rate", "process starts, mean of both", (a+b)/2, "starts/s", "")
	}
	e.out.ratio("ratio Vigil lite burn-down/process starts", "lite_burn", "start_rate")
}

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Run starts the cluster, runs the workload while it injects cfg.Faults
// faults, lets the cluster settle, collects the history, stops everything
// it started and checks the invariants. Progress goes to out. The error is
// about the harness itself (a process that would not start); violations
// are in the returned Report.
func Run(ctx context.Context, cfg Config, out io.Writer) (*Report, error) {
	if cfg.Agents < 4 {
		return nil, fmt.Errorf("chaos: %d agents; the cluster needs 4 or more", cfg.Agents)
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(out, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
	}
	logf("chaos: seed %d, %d faults, mean gap %s, work dir %s", cfg.Seed, cfg.Faults, cfg.gap(), cfg.WorkDir)
	rec := newRecorder()
	j, script, err := newJournal(cfg.WorkDir)
	if err != nil {
		return nil, err
	}
	c, err := startCluster(ctx, cfg, rec)
	defer func() {
		if c != nil {
			c.shutdown(ctx)
		}
	}()
	if err != nil {
		return nil, err
	}
	h := &History{Seed: cfg.Seed, Timing: cfg.Timing, Timeouts: workloadTimeouts()}
	if err = c.applyWorkload(ctx, script, j.path, h); err != nil {
		return nil, err
	}
	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.sampleLeaders(bg, 250*time.Millisecond) }()
	go func() { defer wg.Done(); c.watchPids(bg, j, 200*time.Millisecond) }()
	trig, stopTrig := context.WithCancel(bg)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.trigger(trig, rand.New(rand.NewPCG(uint64(cfg.Seed), 7)), 6)
	}()
	time.Sleep(3 * time.Second) // a first wave of runs is live before the first fault
	plan := c.faultPhase(ctx, cfg, h, logf)
	stopTrig()
	c.closeSchedule(ctx, h)
	logf("chaos: schedule paused at %s; %d slots were due by the end of the fault phase",
		h.Schedule.Paused.Format("15:04:05.000"), int(h.Schedule.DueBy.Sub(h.Schedule.Start)/h.Schedule.Every))
	c.settle(ctx, cfg, h)
	stopBG()
	wg.Wait()
	if err := c.gather(ctx, cfg, h, j, rec); err != nil {
		return nil, err
	}
	c = nil // gather stopped it
	if err := SaveHistory(filepath.Join(cfg.WorkDir, "history.json"), h); err != nil {
		return nil, err
	}
	rep := NewReport(cfg, h, Check(h), plan)
	return rep, rep.write(cfg.Report)
}

// faultPhase injects the whole plan (every phase) and records the phases
// in h. It returns the plan.
func (c *cluster) faultPhase(ctx context.Context, cfg Config, h *History, logf func(string, ...any)) []Fault {
	plan, starts := cfg.plan()
	began := time.Now()
	for i, seed := range cfg.seeds() {
		n := cfg.Faults
		if i > 0 {
			n = cfg.Faults2
		}
		h.Phases = append(h.Phases, Phase{Seed: seed, Faults: n, From: began.Add(starts[i])})
		logf("chaos: phase %d: %d faults from seed %d, from %s", i+1, n, seed, began.Add(starts[i]).Format("15:04:05"))
	}
	c.inject(ctx, plan, began, logf)
	logf("chaos: %d faults injected in %s; waiting for the runs to end", c.rec.faultCount(), time.Since(began).Round(time.Second))
	return plan
}

// settle waits until no run is live, at most the SLA bound for the
// longest DAG plus 5 s, and then for the last log batches to land.
func (c *cluster) settle(ctx context.Context, cfg Config, h *History) {
	var longest time.Duration
	for _, b := range h.RunBound {
		longest = max(longest, b)
	}
	deadline := time.Now().Add(cfg.Timing.AgentLost + cfg.Timing.Sweep + 5*time.Second + longest + 5*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if n, err := liveRuns(ctx, c.directURL(), ""); err == nil && n == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(2 * cfg.Timing.HeartbeatInterval)
}

// gather fills h from the database, the journal and the replicas' logs,
// stopping the cluster once the database has been read.
func (c *cluster) gather(ctx context.Context, cfg Config, h *History, j *journal, rec *recorder) error {
	h.End = time.Now()
	rec.snapshot(h)
	if err := collect(ctx, c.directURL(), h); err != nil {
		c.shutdown(ctx)
		return err
	}
	c.shutdown(ctx)
	h.Processes, h.Leftovers = rec.processes(), c.leftovers()
	rec.mu.Lock()
	gone := rec.gone
	rec.mu.Unlock()
	var err error
	if h.Executions, err = parseJournal(j.path, gone); err != nil {
		return err
	}
	if h.Graces, err = collectGraces(cfg.WorkDir); err != nil {
		return err
	}
	h.Acks, err = collectAcks(cfg.WorkDir)
	return err
}

// shutdown stops the cluster, every task process an agent left included.
func (c *cluster) shutdown(ctx context.Context) {
	c.stop(context.WithoutCancel(ctx))
}

// write writes the report's text to path (nothing when path is empty).
func (r *Report) write(path string) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(r.Text()), 0o644)
}

// SaveHistory writes h as JSON to path, so that Recheck can judge it again.
func SaveHistory(path string, h *History) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Recheck loads a history saved by a run (history.json in its work
// directory) and checks it again: the same evidence judged by this
// version of the checker. The report goes to report (if not empty).
func Recheck(path, report string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h History
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	total := 0
	for _, p := range h.Phases {
		total += p.Faults
	}
	rep := NewReport(Config{Seed: h.Seed}, &h, Check(&h), make([]Fault, total))
	return rep, rep.write(report)
}

package main

// The `vigil lite` figures (in-process agents spawning `true`) and the
// River side of the comparison.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// litePoll is how often the Lite figures count completions with SQL (the
// in-process agents have no counter the bench can read); a count reads
// every TI of the runs, so not more often.
const litePoll = time.Second

// lite measures `vigil lite` with LiteAgents in-process agents of
// LiteCapacity on the bench database: a burn-down of the runs queued
// (untaken) before it started, and a steady window. queued are those
// runs.
func (e *env) lite(ctx context.Context, conn *pgx.Conn, queued []int64) error {
	if err := e.liteStartRate(ctx, "start_rate_before", "before"); err != nil {
		return err
	}
	e.progress("lite burn-down", "runs", len(queued))
	// The seeded agents stop heartbeating with the first vigil; the 2 h
	// agent-lost threshold (the maximum) keeps this term's reapers in
	// their grace, so their work is not reaped under the measurement.
	v, err := e.startVigil(ctx, "vigil-lite", "--agent-lost-threshold", "2h", "--agents", strconv.Itoa(e.cfg.LiteAgents),
		"--agent-capacity", strconv.Itoa(e.cfg.LiteCapacity), "--agent-tags", benchTag, "--drain-timeout", "1s",
		"--agent-claim-window", e.cfg.ClaimWindow.String())
	if err != nil {
		return err
	}
	defer v.stop(30 * time.Second)
	want := int64(len(queued) * wideWidth)
	label := fmt.Sprintf("lite burn-down (%d agents x %d, `true`)", e.cfg.LiteAgents, e.cfg.LiteCapacity)
	if _, err := e.waitCount(ctx, want, litePoll,
		func() (int64, error) { return ended(ctx, conn, queued) }, v.exited); err != nil {
		return err
	}
	if err := e.reportBurnDown(ctx, conn, "lite_burn", label, queued, want); err != nil {
		return err
	}
	if err := e.liteStartRate(ctx, "start_rate_after", "after"); err != nil {
		return err
	}
	e.liteStartRatio()
	if err := e.unfinished(ctx, conn, "lite burn-down", queued); err != nil {
		return err
	}
	if err := e.liteStages(ctx, conn, queued); err != nil {
		return err
	}
	e.liteSupervisors(filepath.Join(e.dir, "vigil-lite.log"))
	e.progress("lite steady", "for", e.cfg.Steady)
	if _, err := e.steady(ctx, v, conn, "lite_steady", fmt.Sprintf("lite steady %s", e.cfg.Steady), backlogFor(e.out.vals["lite_burn"]), litePoll,
		func(runs []int64) (int64, error) { return successes(ctx, conn, runs) }, v.exited); err != nil {
		return err
	}
	if err := e.statements(ctx, conn, "vigil lite"); err != nil {
		return err
	}
	return v.stop(30 * time.Second)
}

// liteSupervisors prints the task supervisor each in-process agent logged
// at start (agent.Config.SupervisorPath): a Lite figure measured under the
// fallback, `vigil __supervise`, costs about 10 ms more CPU per TI
// (docs/performance.md), so the output says which one ran.
func (e *env) liteSupervisors(logPath string) {
	f, err := os.Open(logPath)
	if err != nil {
		fmt.Fprintf(e.out.w, "# lite task supervisor: %v\n", err)
		return
	}
	defer f.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Msg  string   `json:"msg"`
			Path string   `json:"path"`
			Args []string `json:"args"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "task supervisor" {
			seen[strings.TrimSpace(rec.Path+" "+strings.Join(rec.Args, " "))]++
		}
	}
	if len(seen) == 0 {
		fmt.Fprintf(e.out.w, "# lite task supervisor: none logged in %s\n", logPath)
	}
	for sup, n := range seen {
		fmt.Fprintf(e.out.w, "# lite task supervisor: %s (%d agents)\n", sup, n)
	}
}

// riverResult is one line of bench/river's output.
type riverResult struct {
	Mode       string  `json:"mode"`
	Jobs       int64   `json:"jobs"`
	Seconds    float64 `json:"seconds"`
	JobsPerSec float64 `json:"jobs_per_sec"`
	WALPerJob  float64 `json:"wal_bytes_per_job"`
}

// river runs bench/river against its own database on the same server.
func (e *env) river(ctx context.Context) error {
	e.progress("river", "jobs", e.cfg.RiverJobs, "steady", e.cfg.Steady)
	cmd := exec.CommandContext(ctx, e.riverBin, "-database-url", e.riverURL,
		"-jobs", strconv.Itoa(e.cfg.RiverJobs), "-duration", e.cfg.Steady.String())
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bench/river: %w", err)
	}
	sc := bufio.NewScanner(&stdout)
	seen := map[string]bool{}
	for sc.Scan() {
		var r riverResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("bench/river output %q: %w", sc.Text(), err)
		}
		seen[r.Mode] = true
		switch r.Mode {
		case "burn-down":
			e.out.figure("river_burn", fmt.Sprintf("River burn-down (%d jobs)", r.Jobs), r.JobsPerSec, "jobs/s",
				fmt.Sprintf("%.1fs", r.Seconds))
			e.out.figure("river_burn_wal", "River burn-down: WAL per job", r.WALPerJob, "bytes", "client start to last completion")
		case "steady":
			e.out.figure("river_steady", fmt.Sprintf("River steady %s", e.cfg.Steady), r.JobsPerSec, "jobs/s",
				fmt.Sprintf("%d jobs in %.1fs", r.Jobs, r.Seconds))
			e.out.figure("river_steady_wal", "River steady: WAL per job", r.WALPerJob, "bytes", "the window, its inserts included")
		default:
			return fmt.Errorf("bench/river: unknown mode %q", r.Mode)
		}
	}
	if !seen["burn-down"] || !seen["steady"] {
		return fmt.Errorf("bench/river printed %d of its 2 results", len(seen))
	}
	return nil
}

// Command chaos runs the chaos suite (docs/reliability.md): a real Pro
// cluster under seeded faults, then the invariant checker. `make chaos`
// builds bin/vigil and runs it. Configuration comes from the environment:
// CHAOS_SEED, CHAOS_FAULTS, CHAOS_DURATION (see chaos.ConfigFromEnv), plus
// CHAOS_VIGIL (the binary, default bin/vigil), CHAOS_VIGIL_HOOKS (the
// same built with the test hooks, for the skewed agents; default
// bin/testhooks/vigil), CHAOS_DIR (the work
// directory, default a new temporary one) and CHAOS_REPORT (default
// CHAOS_DIR/report.txt). It exits 1 on any violation, 2 on a bad setting.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/vigil-sched/vigil/chaos"
)

func main() {
	cfg, err := chaos.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	cfg.VigilBin = envOr("CHAOS_VIGIL", "bin/vigil")
	if cfg.VigilBin, err = filepath.Abs(cfg.VigilBin); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: CHAOS_VIGIL:", err)
		os.Exit(2)
	}
	if _, err := os.Stat(cfg.VigilBin); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: CHAOS_VIGIL=%s (environment or default): %v; run make build first\n", cfg.VigilBin, err)
		os.Exit(2)
	}
	cfg.HooksBin = envOr("CHAOS_VIGIL_HOOKS", "bin/testhooks/vigil")
	if cfg.HooksBin, err = filepath.Abs(cfg.HooksBin); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: CHAOS_VIGIL_HOOKS:", err)
		os.Exit(2)
	}
	if _, err := os.Stat(cfg.HooksBin); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: CHAOS_VIGIL_HOOKS=%s (environment or default): %v; make chaos builds it "+
			"(go build -tags vigil_testhooks -o bin/testhooks/ ./cmd/vigil ./cmd/vigil-supervise)\n", cfg.HooksBin, err)
		os.Exit(2)
	}
	if hist := os.Getenv("CHAOS_HISTORY"); hist != "" {
		rep, err := chaos.Recheck(hist, os.Getenv("CHAOS_REPORT"))
		finish(rep, err, os.Getenv("CHAOS_REPORT"))
		return
	}
	cfg.WorkDir = os.Getenv("CHAOS_DIR")
	if cfg.WorkDir == "" {
		if cfg.WorkDir, err = os.MkdirTemp("", "vigil-chaos-*"); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(1)
		}
	}
	cfg.Report = envOr("CHAOS_REPORT", filepath.Join(cfg.WorkDir, "report.txt"))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := chaos.Run(ctx, cfg, os.Stdout)
	finish(rep, err, cfg.Report)
}

// finish prints the report and exits 1 on an error or a violation.
func finish(rep *chaos.Report, err error, path string) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
	fmt.Print(rep.Text())
	if path != "" {
		fmt.Println("report written to", path)
	}
	if len(rep.Violations()) > 0 {
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

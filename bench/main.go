// Command bench is `make bench`: it measures Vigil's throughput and the
// leader's loops on the real `vigil` binary, over HTTP, on a private
// durable PostgreSQL seeded with realistic history, and River's
// throughput on the same server in the same run, and prints one line per
// figure and the Vigil/River ratios. docs/performance.md records the
// figures; adr/0024-bench-beside-river.md explains the design.
//
// Everything it starts (PostgreSQL, vigil processes, the River program)
// it stops by its own handle before it returns, and it removes its work
// directory unless -keep is given. Progress goes to stderr.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/controlplane"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/store"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, cfg, log); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run is one whole bench; it returns after stopping everything it started.
func run(ctx context.Context, cfg config, log *slog.Logger) (err error) {
	dir, err := os.MkdirTemp("", "vigil-bench-")
	if err != nil {
		return err
	}
	if cfg.KeepDir {
		log.Info("work directory kept", "dir", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	// PostgreSQL runs as the postgres user when the bench runs as root
	// (store/pgcluster): it must reach its data directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	e := &env{cfg: cfg, dir: dir, out: &reporter{w: os.Stdout, vals: map[string]float64{}}, log: log, started: time.Now(),
		agentTok: token(), opTok: token()}
	if e.vigilBin, e.riverBin, err = build(ctx, cfg.Repo, dir); err != nil {
		return err
	}
	pg, err := startPostgres(ctx, filepath.Join(dir, "pg"), log, "vigil", "river")
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = errors.Join(err, pg.Stop(sctx))
	}()
	e.url, e.riverURL = pg.URL("vigil"), pg.URL("river")
	if err := e.header(ctx); err != nil {
		return err
	}
	switch cfg.Only {
	case "log-ingest":
		return e.onlyLogIngest(ctx)
	case "api-history":
		return e.onlyAPIHistory(ctx)
	case "lite":
		return e.onlyLite(ctx)
	}
	if err := e.prepare(ctx); err != nil {
		return err
	}
	if err := e.measureVigil(ctx); err != nil {
		return err
	}
	if err := e.river(ctx); err != nil {
		return err
	}
	e.out.ratio("ratio Vigil/River, burn-down (synthetic)", "burn", "river_burn")
	e.out.ratio("ratio Vigil/River, steady (synthetic)", "steady", "river_steady")
	e.out.ratio("ratio Vigil lite/River, burn-down", "lite_burn", "river_burn")
	e.out.ratio("WAL per TI/job Vigil/River, burn-down", "burn_wal", "river_burn_wal")
	e.out.ratio("WAL per TI/job Vigil/River, steady", "steady_wal", "river_steady_wal")
	e.out.ratio("ratio Vigil lite/synthetic, burn-down", "lite_burn", "burn")
	e.progress("done")
	return nil
}

// token is a random bearer token for this run's vigil processes.
func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// header prints what the figures were measured on.
func (e *env) header(ctx context.Context) error {
	conn, err := e.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var version, syncCommit, fsync, buffers string
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('synchronous_commit'),
	       current_setting('fsync'), current_setting('shared_buffers')`).Scan(&version, &syncCommit, &fsync, &buffers); err != nil {
		return err
	}
	commit, _ := exec.CommandContext(ctx, "git", "-C", e.cfg.Repo, "describe", "--always", "--dirty").Output()
	fmt.Fprintf(e.out.w, "# make bench %s, commit %s, %d CPUs, %s\n", time.Now().UTC().Format(time.RFC3339),
		strings.TrimSpace(string(commit)), runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(e.out.w, "# PostgreSQL %s, synchronous_commit=%s, fsync=%s, shared_buffers=%s\n", version, syncCommit, fsync, buffers)
	return nil
}

// prepare migrates the vigil database, applies the bench's DAGs and
// seeds it.
func (e *env) prepare(ctx context.Context) error {
	if err := e.applyDAGs(ctx); err != nil {
		return err
	}
	conn, err := e.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	e.progress("seed", "history_runs", e.cfg.HistoryRuns, "live_runs", e.cfg.LiveRuns)
	start := time.Now()
	c, err := seed(ctx, conn, e.cfg.HistoryRuns, e.cfg.LiveRuns, e.cfg.PruneAgents)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out.w, "# seeded %d terminal TIs, %d TIs in %d running runs, %d prunable agents in %.0fs\n",
		c.HistoryTIs, c.LiveTIs, e.cfg.LiveRuns, c.PrunableAgents, time.Since(start).Seconds())
	return nil
}

// applyDAGs migrates the vigil database and applies the bench's DAGs.
func (e *env) applyDAGs(ctx context.Context) error {
	st, err := e.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	return applySpecs(ctx, st, []string{seededSpec(), heldSpec(), wideSpec(), chainSpec(e.cfg.ChainLen), logSpec(e.cfg.LogLines)})
}

// openStore migrates the vigil database and opens it; the caller closes it.
func (e *env) openStore(ctx context.Context) (*store.Store, error) {
	e.progress("migrate and apply DAGs")
	return controlplane.OpenStore(ctx, controlplane.Database{URL: e.url, Migrate: true})
}

// applySpecs parses and applies the bench's DAG specs.
func applySpecs(ctx context.Context, st *store.Store, specs []string) error {
	for _, src := range specs {
		spec, err := dag.Parse([]byte(src))
		if err != nil {
			return fmt.Errorf("bench DAG: %w", err)
		}
		if _, err := st.ApplyDAG(ctx, spec); err != nil {
			return err
		}
	}
	return nil
}

// loadAverage is the machine's 1, 5 and 15 minute load averages as
// /proc/loadavg gives them ("n/a" where it cannot be read): the figures
// are only comparable on a quiet machine.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

// withDAGs applies the bench's DAGs and runs phase on a connection of
// its own: an -only phase, without the seed.
func (e *env) withDAGs(ctx context.Context, phase func(*pgx.Conn) error) error {
	if err := e.applyDAGs(ctx); err != nil {
		return err
	}
	conn, err := e.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return phase(conn)
}

// onlyLogIngest is `-only log-ingest`: the DAGs, then the log ingest
// figure alone.
func (e *env) onlyLogIngest(ctx context.Context) error {
	return e.withDAGs(ctx, func(conn *pgx.Conn) error { return e.logIngest(ctx, conn) })
}

// onlyLite is `-only lite`: the DAGs, the Lite burn-down's runs queued
// through a vigil process with no agents, then the Lite figures (the
// process-start rate, the burn-down and its ratio to it, the stages, the
// steady window), without the seed or any other phase.
func (e *env) onlyLite(ctx context.Context) error {
	return e.withDAGs(ctx, func(conn *pgx.Conn) error {
		v, err := e.startVigil(ctx, "vigil-queue", "--agents", "0")
		if err != nil {
			return err
		}
		queued, err := trigger(ctx, v, wideDAG, runsFor(e.cfg.LiteBurnDown, wideWidth))
		if err == nil {
			err = v.stop(30 * time.Second)
		}
		if err != nil {
			_ = v.stop(30 * time.Second)
			return err
		}
		fmt.Fprintf(e.out.w, "# queued %d TIs for Lite; load average %s\n", len(queued)*wideWidth, loadAverage())
		return e.lite(ctx, conn, queued)
	})
}

// syntheticAgentLost is the agent-lost threshold of the vigil process the
// synthetic agents drive.
const syntheticAgentLost = 30 * time.Second

// measureVigil runs every Vigil figure: the leader's loops and the
// synthetic agents on one vigil process, then `vigil lite` with
// in-process agents, then log ingest on a Lite with one agent.
func (e *env) measureVigil(ctx context.Context) error {
	// A 5 s heartbeat and a 30 s agent-lost threshold: the reapers leave
	// their post-leadership grace 30 s into the term, before the reap
	// figure, and the seeded agents, adopted at once, outlive it.
	v, err := e.startVigil(ctx, "vigil-synthetic", "--agents", "0", "--heartbeat-interval", "5s",
		"--agent-lost-threshold", syntheticAgentLost.String())
	if err != nil {
		return err
	}
	defer v.stop(30 * time.Second)
	conn, err := e.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	stopSeeded, err := e.adoptSeeded(ctx, v, conn)
	if err != nil {
		return err
	}
	defer stopSeeded()
	if _, err := conn.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		return err
	}
	steps := []func() error{
		func() error { return e.idle(ctx, v) },
		func() error { return e.heartbeats(ctx, v, conn) },
		func() error { return e.reapStale(ctx, v, conn) },
		func() error { return e.synthetic(ctx, v, conn) },
		func() error { return e.prune(ctx, v, conn) },
		func() error { return e.statements(ctx, conn, "vigil with synthetic agents") },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
		if err := v.exited(); err != nil {
			return err
		}
	}
	// The lite burn-down's work is queued now, while no agent offers its
	// tag, so that it is all there when vigil lite starts.
	queued, err := trigger(ctx, v, wideDAG, runsFor(e.cfg.LiteBurnDown, wideWidth))
	if err != nil {
		return err
	}
	stopSeeded()
	if err := v.stop(30 * time.Second); err != nil {
		return err
	}
	if err := e.clearLeftovers(ctx, conn, queued); err != nil {
		return err
	}
	if err := e.lite(ctx, conn, queued); err != nil {
		return err
	}
	return e.logIngest(ctx, conn)
}

// clearLeftovers cancels, with SQL while no vigil runs, the throughput
// runs a cut phase left unfinished (all but keep) and drops their
// scheduler marks, so the next vigil process starts from the work it is
// measured on, not from what the last one could not finish.
func (e *env) clearLeftovers(ctx context.Context, conn *pgx.Conn, keep []int64) error {
	var runs, tis int64
	err := conn.QueryRow(ctx, `
		WITH r AS (
		  UPDATE runs SET state = 'cancelled', end_date = now(), updated_at = now()
		   WHERE dag_id = ANY ($1) AND state IN ('queued', 'running') AND id <> ALL ($2) RETURNING id),
		t AS (
		  UPDATE task_instances SET state = 'cancelled', end_date = now(), updated_at = now()
		   WHERE run_id IN (SELECT id FROM r) AND state IN ('none', 'scheduled', 'queued', 'running', 'up_for_retry')
		  RETURNING 1),
		d AS (DELETE FROM run_dirty WHERE run_id IN (SELECT id FROM r))
		SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM t)`, []string{wideDAG, chainDAG}, keep).Scan(&runs, &tis)
	if err != nil {
		return fmt.Errorf("clear leftovers: %w", err)
	}
	if runs > 0 {
		fmt.Fprintf(e.out.w, "# cleared %d runs (%d TIs) the synthetic phase left unfinished\n", runs, tis)
	}
	return nil
}

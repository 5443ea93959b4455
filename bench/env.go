package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/api/client"
)

// env is one bench run: what it built and started, and where figures go.
type env struct {
	cfg             config
	dir             string // work directory, removed at the end unless -keep
	vigilBin        string
	riverBin        string
	url, riverURL   string // the vigil and River databases, on one server
	agentTok, opTok string
	out             *reporter
	log             *slog.Logger // progress, on stderr
	started         time.Time
}

// reporter prints one line per figure and keeps the values the ratios
// need.
type reporter struct {
	w    io.Writer
	vals map[string]float64
}

// figure prints label, value and unit; key (when not empty) keeps value
// for ratio.
func (r *reporter) figure(key, label string, value float64, unit, note string) {
	if key != "" {
		r.vals[key] = value
	}
	line := fmt.Sprintf("%-50s %12s %s", label, strconv.FormatFloat(value, 'f', -1, 64), unit)
	if value >= 100 || value != float64(int64(value)) && value > 10 {
		line = fmt.Sprintf("%-50s %12.1f %s", label, value, unit)
	} else if value != float64(int64(value)) {
		line = fmt.Sprintf("%-50s %12.2f %s", label, value, unit)
	}
	if note != "" {
		line += "  (" + note + ")"
	}
	fmt.Fprintln(r.w, line)
}

// missing prints a figure that could not be measured, and why.
func (r *reporter) missing(label, why string) {
	fmt.Fprintf(r.w, "%-50s %12s  (%s)\n", label, "n/a", why)
}

// ratio prints num/den when both were measured.
func (r *reporter) ratio(label, num, den string) {
	n, ok1 := r.vals[num]
	d, ok2 := r.vals[den]
	if !ok1 || !ok2 || d == 0 {
		fmt.Fprintf(r.w, "%-50s %12s\n", label, "n/a")
		return
	}
	fmt.Fprintf(r.w, "%-50s %12.3f x\n", label, n/d)
}

// vigilProc is a running `vigil lite` the bench drives.
type vigilProc struct {
	*proc
	base  string
	ledAt time.Time      // when it was first seen leading
	op    *client.Client // operator API
	ag    *apiClient     // agent API
}

// startVigil runs `vigil lite` on the bench database with extra flags
// (they may repeat and so override the ones here) and waits until it
// leads.
//
// The flags here keep the seed stable: the seeded queued TIs wait for a
// tag no agent offers (dispatch-lost 24h); the mass-silence brake is off,
// so that the silent agents planted for the reap figure are reaped
// whatever else the bench did to the fleet just before; retention prunes
// agents inactive for a day (the planted ones are 60 days silent) at its
// first pass, a minute into the term.
func (e *env) startVigil(ctx context.Context, name string, extra ...string) (*vigilProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"lite", "--database-url", e.url, "--data-dir", filepath.Join(e.dir, name),
		"--listen", addr, "--agent-token", e.agentTok, "--operator-token", e.opTok,
		"--dispatch-lost-threshold", "24h", "--mass-silence-fraction", "0",
		"--sweep-interval", "2s", "--retention-agents", "24h", "--retention-interval", "1m"}, extra...)
	p, err := startProc(name, e.vigilBin, filepath.Join(e.dir, name+".log"), args...)
	if err != nil {
		return nil, err
	}
	base := "http://" + addr
	v := &vigilProc{proc: p, base: base, ag: newAPIClient(base, e.agentTok, 512)}
	if v.op, err = client.New(base, e.opTok, nil); err == nil {
		err = waitLeader(ctx, v, time.Minute)
	}
	if err != nil {
		_ = p.stop(10 * time.Second)
		return nil, fmt.Errorf("%s: %w (log: %s)", name, err, filepath.Join(e.dir, name+".log"))
	}
	v.ledAt = time.Now()
	e.log.Info("vigil leading", "name", name, "pid", p.cmd.Process.Pid, "api", base)
	return v, nil
}

// waitLeader waits until /readyz answers and vigil_leader is 1.
func waitLeader(ctx context.Context, v *vigilProc, timeout time.Duration) error {
	if err := waitReady(ctx, v.proc, v.base, timeout); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		m, err := scrape(ctx, v.base)
		if err == nil && m["vigil_leader"] == 1 {
			return nil
		}
		if err := v.exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not leading within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// conn opens a connection to the vigil database; the caller closes it.
func (e *env) conn(ctx context.Context) (*pgx.Conn, error) { return pgx.Connect(ctx, e.url) }

// trigger starts n runs of dagID through the operator API and returns
// their ids.
func trigger(ctx context.Context, v *vigilProc, dagID string, n int) ([]int64, error) {
	ids := make([]int64, 0, n)
	for i := 0; i < n; i++ {
		r, err := v.op.TriggerRun(ctx, dagID)
		if err != nil {
			return ids, fmt.Errorf("trigger %s: %w", dagID, err)
		}
		ids = append(ids, r.ID)
	}
	return ids, nil
}

// runsFor is how many runs of width TIs hold at least tis TIs.
func runsFor(tis, width int) int { return (tis + width - 1) / width }

// rate reads, from the database clock, how many TIs of runs succeeded
// and the span from the first claim to the last end: a burn-down's rate.
func rate(ctx context.Context, conn *pgx.Conn, runs []int64) (n int64, span time.Duration, err error) {
	var secs *float64
	err = conn.QueryRow(ctx, `
		SELECT count(*), extract(epoch FROM max(end_date) - min(claimed_at))::float8
		  FROM task_instances WHERE run_id = ANY($1) AND state = 'success'`, runs).Scan(&n, &secs)
	if secs != nil {
		span = time.Duration(*secs * float64(time.Second))
	}
	return n, span, err
}

// progress logs a phase's start on stderr with the time since the bench began.
func (e *env) progress(phase string, args ...any) {
	e.log.Info(phase, append([]any{"t", time.Since(e.started).Round(time.Second)}, args...)...)
}

// dbNow is the database clock.
func dbNow(ctx context.Context, conn *pgx.Conn) (time.Time, error) {
	var t time.Time
	return t, conn.QueryRow(ctx, `SELECT now()`).Scan(&t)
}

// oneLine shortens a statement for a report line.
func oneLine(q string, n int) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > n {
		return q[:n] + "…"
	}
	return q
}

package main

// What the bench starts and must stop: its PostgreSQL cluster, the vigil
// processes and the River program. Each is stopped by its own handle (the
// cluster through pg_ctl and its postmaster.pid, processes by pid), never
// by name.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/store/pgcluster"
)

// build compiles `vigil`, with vigil-supervise beside it as `make build`
// installs them (Lite's agents start each task under it), and
// bench/river into dir and returns the paths of vigil and River's program.
func build(ctx context.Context, repo, dir string) (vigil, river string, err error) {
	vigil, river = filepath.Join(dir, "vigil"), filepath.Join(dir, "riverbench")
	steps := []struct {
		wd   string
		args []string
	}{
		{repo, []string{"build", "-o", dir + string(filepath.Separator), "./cmd/vigil", "./cmd/vigil-supervise"}},
		{filepath.Join(repo, "bench", "river"), []string{"build", "-o", river, "."}},
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, "go", s.args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = s.wd, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", "", fmt.Errorf("go %v in %s: %w", s.args, s.wd, err)
		}
	}
	return vigil, river, nil
}

// startPostgres starts a durable cluster under dir (synchronous_commit and
// fsync at their defaults, on) with pg_stat_statements loaded and
// shared_buffers a production server would have more of than Lite's
// 32MB, and creates the databases named (at least one).
func startPostgres(ctx context.Context, dir string, log *slog.Logger, dbs ...string) (*pgcluster.Cluster, error) {
	cfg := pgcluster.Config{Dir: dir, Logger: log, DBName: dbs[0]} // Start creates the first
	cl, err := pgcluster.Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// ALTER SYSTEM writes postgresql.auto.conf, read after the settings
	// pgcluster manages, so these survive its rewrite at the restart.
	err = withConn(ctx, cl.URL("postgres"), func(conn *pgx.Conn) error {
		for _, s := range []string{
			`ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`,
			`ALTER SYSTEM SET shared_buffers = '512MB'`,
			`ALTER SYSTEM SET max_connections = 300`,
		} {
			if _, err := conn.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = cl.Stop(ctx)
	}
	if err == nil {
		cl, err = pgcluster.Start(ctx, cfg)
	}
	if err != nil {
		if cl != nil {
			_ = cl.Stop(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("configure PostgreSQL: %w", err)
	}
	err = withConn(ctx, cl.URL("postgres"), func(conn *pgx.Conn) error {
		for _, db := range dbs[1:] {
			if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{db}.Sanitize()); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		err = withConn(ctx, cl.URL(dbs[0]), func(conn *pgx.Conn) error {
			_, err := conn.Exec(ctx, `CREATE EXTENSION pg_stat_statements`)
			return err
		})
	}
	if err != nil {
		_ = cl.Stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("create databases: %w", err)
	}
	return cl, nil
}

// withConn runs f on a connection of its own to url.
func withConn(ctx context.Context, url string, f func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return f(conn)
}

// proc is a child process the bench started.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startProc starts bin with args, its output appended to logPath.
func startProc(name, bin, logPath string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM to the process (by pid), waits up to grace, then
// SIGKILLs its process group (led by that pid).
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return fmt.Errorf("%s (pid %d) ignored SIGTERM for %s and was killed", p.name, p.cmd.Process.Pid, grace)
}

// exited reports an early exit of the process, if it happened.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s (pid %d) exited: %v", p.name, p.cmd.Process.Pid, p.err)
	default:
		return nil
	}
}

// freeAddr returns a 127.0.0.1 address whose port was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitReady polls GET /readyz until it answers 200 (the leader is
// elected and the fence taken) or timeout passes, or p exits.
func waitReady(ctx context.Context, p *proc, base string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := p.exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s within %s (last: %v)", p.name, base, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

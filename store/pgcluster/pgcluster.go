// Package pgcluster starts and stops a private PostgreSQL cluster from the
// PostgreSQL server binaries installed on the machine. `vigil lite` uses it
// for its database under --data-dir when no --database-url is given
// (docs/design.md §1), and package storetest uses it for the throwaway cluster of a
// test binary (docs/design.md §11).
//
// The cluster listens on 127.0.0.1 and on a unix socket in its own data
// directory (mode 0700), nowhere else, and has one superuser, [User].
// With Config.PasswordFile (vigil lite) every connection must give that
// user's generated password (SCRAM-SHA-256); without it (test clusters,
// package storetest) every local connection is trusted. As root, every
// PostgreSQL binary runs through `runuser -u postgres --`, because PostgreSQL
// refuses to run as root.
//
// What it does not do: it installs nothing and creates no OS user; it does
// not supervise the server (if the server dies, nothing restarts it until the
// next Start); it offers no TLS, so it is for private, single-machine use
// only.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// User is the superuser initdb creates in a new cluster ("vigil"). URL
// connects as this user, with Config.PasswordFile's password if any.
const User = "vigil"

// DefaultDBName is the database Start creates when Config.DBName is empty.
const DefaultDBName = "vigil"

// Default timeouts, used when the Config fields are zero.
const (
	// DefaultStartTimeout bounds the wait for a started server to accept
	// connections.
	DefaultStartTimeout = 60 * time.Second
	// DefaultStopTimeout bounds the wait for a fast shutdown.
	DefaultStopTimeout = 60 * time.Second
)

// ErrAlreadyRunning is returned (wrapped) by Start when a server is already
// running from Config.Dir, started by another process or an earlier Start
// that was not stopped.
var ErrAlreadyRunning = errors.New("a PostgreSQL server is already running from this data directory")

const (
	confFile    = "vigil.conf"                             // rewritten by every Start
	includeLine = "include_if_exists = '" + confFile + "'" // appended to postgresql.conf once
	logDirName  = "log"                                    // under Dir
	logFileName = "server.log"                             // pg_ctl -l target in Dir/log
	maxLogBytes = 16 << 20                                 // rotate to server.log.1 above this at Start
	maxSockDir  = 91                                       // longest socket directory: sun_path is 108 bytes with "/.s.PGSQL.65535"
)

// Config configures Start. Only Dir is required.
type Config struct {
	// Dir is the cluster's data directory. Start runs initdb when it has no
	// PG_VERSION file (creating Dir if missing; it must then be empty) and
	// reuses the cluster otherwise. The server log goes to Dir/log/server.log
	// and the unix socket into Dir.
	Dir string
	// Port is the TCP port on 127.0.0.1. 0 picks a free port at each Start
	// (retrying on a lost bind race).
	Port int
	// Logger receives progress and warnings; nil discards them.
	Logger *slog.Logger
	// BinDir, if set, is the only directory searched for initdb, pg_ctl and
	// postgres. Otherwise PATH is searched first, then the newest
	// /usr/lib/postgresql/*/bin (docs/design.md §11); for an existing cluster the
	// first directory of its major version wins.
	BinDir string
	// DBName is the database Start creates if missing; empty means
	// DefaultDBName.
	DBName string
	// Ephemeral trades durability for speed, for throwaway clusters (tests):
	// fsync, synchronous_commit and full_page_writes are off and initdb skips
	// syncing. A machine crash can corrupt such a cluster. Never set it for
	// data that must survive.
	Ephemeral bool
	// StartTimeout bounds the wait for the server to accept connections;
	// zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// StopTimeout bounds Stop's fast shutdown; zero means DefaultStopTimeout.
	StopTimeout time.Duration
	// PasswordFile, if set, is the file holding User's password, which
	// every connection then needs (scram-sha-256 in pg_hba.conf, for the
	// socket and TCP alike). Start generates it (mode 0600, owned by the
	// calling process's user) when missing, and moves a cluster that
	// trusted local connections to passwords (see ensureAuth). Put it
	// outside Dir, where only Vigil's user may read it: as root, Dir
	// belongs to the postgres user. Empty: trust, for throwaway test
	// clusters only.
	PasswordFile string
}

// Cluster is a running server started by Start. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg     Config
	dir     string
	port    int
	bin     binaries
	run     *runner
	log     *slog.Logger
	logFile string
	// password is User's, from Config.PasswordFile; "" with trust.
	password string

	mu      sync.Mutex
	stopped bool
}

// Start prepares Config.Dir, runs initdb if it holds no cluster, and starts
// the server with pg_ctl, listening only on 127.0.0.1:Port with its unix
// socket in Dir. It returns once the server accepts connections (bounded by
// StartTimeout) and the database Config.DBName exists.
//
// Errors name the step that failed and carry the command's output and the
// tail of the server log. Without server binaries the error wraps
// ErrNoBinaries; with a server already running from Dir it wraps
// ErrAlreadyRunning. As root without a "postgres" OS user or runuser, Start
// fails and creates nothing. If Start fails after the server came up, it stops
// the server again.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("pgcluster: Config.Dir is required")
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("pgcluster: Config.Port %d out of range 0..65535", cfg.Port)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DBName == "" {
		cfg.DBName = DefaultDBName
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: data directory: %w", err)
	}

	var wantMajor string
	if v, err := os.ReadFile(filepath.Join(dir, "PG_VERSION")); err == nil {
		wantMajor = strings.TrimSpace(string(v))
	}
	bin, err := findBinaries(ctx, cfg.BinDir, wantMajor)
	if err != nil {
		return nil, err
	}
	r, err := newRunner()
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		cfg:     cfg,
		dir:     dir,
		bin:     bin,
		run:     r,
		log:     cfg.Logger.With("dir", dir),
		logFile: filepath.Join(dir, logDirName, logFileName),
	}

	if err := r.prepareDir(dir, c.log); err != nil {
		return nil, err
	}
	if !hasCluster(dir) {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	}
	if err := c.checkNotRunning(ctx); err != nil {
		return nil, err
	}
	if cfg.PasswordFile != "" {
		if err := c.ensureAuth(ctx); err != nil {
			return nil, err
		}
	}
	if err := c.writeConfig(); err != nil {
		return nil, err
	}
	if err := c.startServer(ctx); err != nil {
		return nil, err
	}
	if err := c.ensureDB(ctx); err != nil {
		c.stopImmediate(ctx)
		return nil, err
	}
	c.log.Info("PostgreSQL started", "version", bin.major, "port", c.port, "log", c.logFile)
	return c, nil
}

// URL returns a postgres:// connection string for database db on this
// cluster: user User with Config.PasswordFile's password (none with
// trust), host 127.0.0.1, the cluster's port, sslmode=disable. It holds
// the password: never log it (url.URL.Redacted).
func (c *Cluster) URL(db string) string {
	user := url.User(User)
	if c.password != "" {
		user = url.UserPassword(User, c.password)
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     user,
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Dir returns the absolute path of the data directory.
func (c *Cluster) Dir() string { return c.dir }

// Port returns the TCP port the server listens on at 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// LogFile returns the path of the server log (pg_ctl -l), Dir/log/server.log.
func (c *Cluster) LogFile() string { return c.logFile }

// Stop shuts the server down with `pg_ctl stop -m fast`, waiting at most
// StopTimeout or until ctx is done. If the fast shutdown fails or times out
// (or ctx is already done), it falls back to `-m immediate` with its own 15s
// bound, so a cancelled ctx still stops the server. Stop is idempotent: once
// it has succeeded, later calls return nil; after a failure a later call
// tries again. A server that is already down is not an error.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	if err := c.stop(ctx); err != nil {
		return err
	}
	c.stopped = true
	return nil
}

// StopImmediate shuts the server down with `pg_ctl stop -m immediate`:
// every backend is killed without a checkpoint, as in a crash, and the
// next Start recovers from the WAL. The chaos suite injects it
// (docs/reliability.md). Like Stop it is idempotent and a server already
// down is not an error.
func (c *Cluster) StopImmediate(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	if err := c.stopImmediate(ctx); err != nil {
		return err
	}
	c.stopped = true
	return nil
}

func (c *Cluster) initdb(ctx context.Context) error {
	args := []string{"-D", c.dir, "-U", User, "--auth=trust", "--encoding=UTF8", "--locale=C"}
	if c.cfg.Ephemeral {
		args = append(args, "--no-sync")
	}
	c.log.Info("initialising PostgreSQL cluster", "version", c.bin.major)
	if _, err := c.run.run(ctx, c.bin.initdb, args...); err != nil {
		return fmt.Errorf("pgcluster: initdb: %w", err)
	}
	return nil
}

// checkNotRunning fails with ErrAlreadyRunning if pg_ctl status finds a live
// postmaster for Dir. A stale postmaster.pid (crashed run) reads as not
// running; the server itself replaces it.
func (c *Cluster) checkNotRunning(ctx context.Context) error {
	out, err := c.run.run(ctx, c.bin.pgCtl, "status", "-D", c.dir)
	switch {
	case err == nil:
		return fmt.Errorf("pgcluster: %w: %s (%s); stop it first (e.g. pg_ctl stop -D %s) or use another data directory",
			ErrAlreadyRunning, c.dir, firstLine(out), c.dir)
	case exitCode(err) == 3: // no server running
		return nil
	default:
		return fmt.Errorf("pgcluster: check whether a server is running: %w", err)
	}
}

// writeConfig (re)writes Dir/vigil.conf and makes sure postgresql.conf
// includes it. Listen address and port are on the command line (see
// startServer) so that nothing in the data directory can override them.
func (c *Cluster) writeConfig() error {
	pgConf := filepath.Join(c.dir, "postgresql.conf")
	b, err := os.ReadFile(pgConf)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if !bytes.Contains(b, []byte(includeLine)) {
		f, err := os.OpenFile(pgConf, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		_, err = fmt.Fprintf(f, "\n# Added by Vigil: settings it manages.\n%s\n", includeLine)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}

	var conf strings.Builder
	conf.WriteString("# Written by Vigil (store/pgcluster) at every start; edits are overwritten.\n")
	// Light on a small or shared machine.
	conf.WriteString("shared_buffers = 32MB\nmax_connections = 200\n")
	conf.WriteString("timezone = 'UTC'\nlog_timezone = 'UTC'\n")
	conf.WriteString("password_encryption = 'scram-sha-256'\n")
	if len(c.dir) <= maxSockDir {
		// The list syntax needs the directory double-quoted (commas); the
		// configuration file syntax needs ' and \ escaped.
		item := `"` + strings.ReplaceAll(c.dir, `"`, `""`) + `"`
		conf.WriteString("unix_socket_directories = " + confQuote(item) + "\n")
	} else {
		c.log.Info("data directory path too long for a unix socket; TCP only")
		conf.WriteString("unix_socket_directories = ''\n")
	}
	if c.cfg.Ephemeral {
		conf.WriteString("# Ephemeral cluster: durability traded for speed.\n")
		conf.WriteString("fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
	}
	if err := c.run.writeOwned(filepath.Join(c.dir, confFile), []byte(conf.String())); err != nil {
		return err
	}
	if err := c.run.mkdirOwned(filepath.Join(c.dir, logDirName)); err != nil {
		return err
	}
	rotateLog(c.logFile)
	return nil
}

// startServer runs pg_ctl start and waits (bounded by StartTimeout) until the
// server accepts connections. With Port 0 it picks a free port and retries
// twice if another process took the port in between.
func (c *Cluster) startServer(ctx context.Context) error {
	deadline := time.Now().Add(c.cfg.StartTimeout)
	for attempt := 1; ; attempt++ {
		port := c.cfg.Port
		if port == 0 {
			p, err := freePort()
			if err != nil {
				return err
			}
			port = p
		}
		c.port = port
		offset := fileSize(c.logFile)
		secs := int(math.Ceil(time.Until(deadline).Seconds()))
		if secs < 1 {
			secs = 1
		}
		sctx, cancel := context.WithDeadline(ctx, deadline.Add(10*time.Second))
		out, err := c.run.run(sctx, c.bin.pgCtl, "start", "-D", c.dir, "-l", c.logFile,
			"-w", "-t", strconv.Itoa(secs),
			"-o", fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1", port))
		cancel()
		if err == nil {
			break
		}
		serverLog := strings.TrimSpace(readFrom(c.logFile, offset, 4096))
		if ctx.Err() != nil || strings.Contains(out, "did not start in time") {
			// A postmaster may be up or still recovering: do not leave it behind.
			c.stopImmediate(ctx)
		} else if c.cfg.Port == 0 && attempt < 3 && strings.Contains(serverLog, "could not bind") {
			c.log.Info("port taken before the server bound it; retrying", "port", port)
			continue
		}
		return fmt.Errorf("pgcluster: start server in %s on 127.0.0.1:%d: %w\nserver log (%s):\n%s",
			c.dir, port, err, c.logFile, serverLog)
	}
	return c.waitReady(ctx, deadline)
}

// waitReady pings until the server accepts connections or deadline passes.
// pg_ctl -w already waited; this confirms that TCP works as configured.
func (c *Cluster) waitReady(ctx context.Context, deadline time.Time) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(cctx, c.URL("postgres"))
		if err == nil {
			err = conn.Ping(cctx)
			_ = conn.Close(cctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			c.stopImmediate(ctx)
			return fmt.Errorf("pgcluster: server in %s not accepting connections on 127.0.0.1:%d within %s: %w",
				c.dir, c.port, c.cfg.StartTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ensureDB creates Config.DBName if it does not exist.
func (c *Cluster) ensureDB(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)",
		c.cfg.DBName).Scan(&exists); err != nil {
		return fmt.Errorf("pgcluster: look up database %q: %w", c.cfg.DBName, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{c.cfg.DBName}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: created meanwhile
		err = nil
	}
	if err != nil {
		return fmt.Errorf("pgcluster: create database %q: %w", c.cfg.DBName, err)
	}
	c.log.Info("created database", "db", c.cfg.DBName)
	return nil
}

func (c *Cluster) stop(ctx context.Context) error {
	if ctx.Err() == nil {
		if _, err := c.run.run(ctx, c.bin.pgCtl, "status", "-D", c.dir); exitCode(err) == 3 {
			return nil // not running
		}
		timeout := c.cfg.StopTimeout
		if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
			timeout = time.Until(d)
		}
		secs := max(1, int(math.Ceil(timeout.Seconds())))
		sctx, cancel := context.WithTimeout(ctx, timeout+5*time.Second)
		_, err := c.run.run(sctx, c.bin.pgCtl, "stop", "-D", c.dir, "-m", "fast", "-w", "-t", strconv.Itoa(secs))
		cancel()
		if err == nil {
			c.log.Info("PostgreSQL stopped")
			return nil
		}
		c.log.Warn("fast shutdown failed; trying immediate", "err", err)
	}
	if err := c.stopImmediate(ctx); err != nil {
		return err
	}
	c.log.Info("PostgreSQL stopped (immediate)")
	return nil
}

// stopImmediate runs pg_ctl stop -m immediate, bounded by 15s even if ctx
// is done. A server that is not running is not an error.
func (c *Cluster) stopImmediate(ctx context.Context) error {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if _, err := c.run.run(ictx, c.bin.pgCtl, "status", "-D", c.dir); exitCode(err) == 3 {
		return nil
	}
	if _, err := c.run.run(ictx, c.bin.pgCtl, "stop", "-D", c.dir, "-m", "immediate", "-w", "-t", "10"); err != nil {
		if _, serr := c.run.run(ictx, c.bin.pgCtl, "status", "-D", c.dir); exitCode(serr) == 3 {
			return nil
		}
		return fmt.Errorf("pgcluster: stop server in %s: %w", c.dir, err)
	}
	return nil
}

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgcluster: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// confQuote quotes s as a postgresql.conf string value.
func confQuote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

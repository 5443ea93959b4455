// Package storetest gives integration tests a private, fully migrated
// PostgreSQL database each, so that they can run with t.Parallel()
// (docs/design.md §11: real dependencies only, a database per test).
//
// The server is the one named by $VIGIL_TEST_DATABASE_URL when set (its user
// must be allowed to CREATE DATABASE). Otherwise the first DB call of a test
// binary starts one throwaway ephemeral cluster with package pgcluster under
// a temporary directory, and Main stops it and removes the directory after
// the tests. A cluster orphaned by a test binary that died (panic, -timeout)
// is stopped and removed by the next test binary that starts one.
//
// The first DB call also creates a template database vigil_template_<random>
// migrated with Migrate; every DB call then clones it with CREATE DATABASE
// ... TEMPLATE, which is much faster than migrating each database.
//
// Usage:
//
//	func TestMain(m *testing.M) { storetest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		url := storetest.DB(t)
//		...
//	}
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/pgcluster"
)

// EnvDatabaseURL names the environment variable with the URL of an existing
// server to use instead of a throwaway cluster (docs/design.md §11). Its user needs
// the CREATEDB privilege; its database is used only to create and drop the
// per-test databases.
const EnvDatabaseURL = "VIGIL_TEST_DATABASE_URL"

// Migrate migrates the database at the given URL to the current schema. DB
// runs it once per test binary, on the template database. It defaults to
// store.Migrate (see migrate_default.go); a test package may replace it in
// its TestMain before calling Main. When it is nil, DB fails the test.
var Migrate func(ctx context.Context, url string) error

// Timeouts for the steps of DB and Main.
const (
	migrateTimeout = 5 * time.Minute
	opTimeout      = time.Minute
)

// tmpPattern names the temporary directories of throwaway clusters, so that
// orphans can be found by later runs.
const tmpPattern = "vigil-storetest-*"

var (
	mainActive atomic.Bool

	srvOnce sync.Once
	srv     *server
	srvErr  error
)

// server is the PostgreSQL server of this test binary.
type server struct {
	adminURL string             // database used for CREATE/DROP DATABASE
	cluster  *pgcluster.Cluster // nil with EnvDatabaseURL
	tmpDir   string             // holds the cluster; removed by Main

	tmplOnce sync.Once
	tmpl     string
	tmplErr  error

	createMu sync.Mutex // PostgreSQL refuses concurrent clones of one template
}

// DB returns the URL of a fresh database private to t, migrated by Migrate,
// and registers a t.Cleanup that drops it (WITH (FORCE), so connections the
// test left open do not block the drop). It is safe for parallel tests. Any
// failure (no server, no binaries, Migrate nil or failing) fails t with the
// cause; the throwaway cluster additionally requires Main in TestMain.
func DB(t testing.TB) string {
	t.Helper()
	s, err := getServer()
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	tmpl, err := s.template()
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	name := dbName("test_", t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := s.clone(ctx, name, tmpl); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := s.drop(ctx, name); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
	return withDB(s.adminURL, name)
}

// Main runs the tests of a package that uses DB, then drops the template
// database and stops and removes the throwaway cluster, if any, and exits
// with the tests' status. A failed cleanup is reported on stderr and makes
// the exit status non-zero. Call it from TestMain:
//
//	func TestMain(m *testing.M) { storetest.Main(m) }
func Main(m *testing.M) {
	mainActive.Store(true)
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintf(os.Stderr, "storetest: cleanup: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func getServer() (*server, error) {
	srvOnce.Do(func() { srv, srvErr = startServer() })
	return srv, srvErr
}

func startServer() (*server, error) {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return &server{adminURL: u}, nil
	}
	if !mainActive.Load() {
		return nil, fmt.Errorf("%s is not set, and the throwaway PostgreSQL cluster needs storetest.Main "+
			"to stop it: add func TestMain(m *testing.M) { storetest.Main(m) } to the package", EnvDatabaseURL)
	}
	sweepOrphans()
	dir, err := os.MkdirTemp("", tmpPattern)
	if err != nil {
		return nil, fmt.Errorf("throwaway cluster: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("throwaway cluster: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*pgcluster.DefaultStartTimeout)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Config{Dir: filepath.Join(dir, "data"), Ephemeral: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("throwaway cluster (or set %s): %w", EnvDatabaseURL, err)
	}
	return &server{adminURL: c.URL("postgres"), cluster: c, tmpDir: dir}, nil
}

func teardown() error {
	if srv == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var errs []error
	if srv.cluster == nil && srv.tmpl != "" {
		// A shared server keeps what we leave; a throwaway cluster goes whole.
		errs = append(errs, srv.drop(ctx, srv.tmpl))
	}
	if srv.cluster != nil {
		if err := srv.cluster.Stop(ctx); err != nil {
			errs = append(errs, err)
		} else if err := os.RemoveAll(srv.tmpDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// template returns the name of the migrated template database, creating it
// on the first call.
func (s *server) template() (string, error) {
	s.tmplOnce.Do(func() { s.tmpl, s.tmplErr = s.createTemplate() })
	return s.tmpl, s.tmplErr
}

func (s *server) createTemplate() (string, error) {
	if Migrate == nil {
		return "", errors.New("storetest.Migrate is nil: nothing can migrate the test databases " +
			"(it defaults to store.Migrate once migrate_default.go is in place; a package may set it in TestMain)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
	defer cancel()
	name := dbName("vigil_template_", "")
	conn, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", redact(s.adminURL), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)); err != nil {
		return "", fmt.Errorf("create template database %s: %w", name, err)
	}
	fail := func(err error) (string, error) {
		if derr := s.drop(context.Background(), name); derr != nil {
			err = errors.Join(err, derr)
		}
		return "", err
	}
	if err := Migrate(ctx, withDB(s.adminURL, name)); err != nil {
		return fail(fmt.Errorf("migrate template database %s: %w", name, err))
	}
	// No connection may remain on a template while it is cloned.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+ident(name)+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return fail(fmt.Errorf("close template database %s: %w", name, err))
	}
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name); err != nil {
		return fail(fmt.Errorf("disconnect template database %s: %w", name, err))
	}
	return name, nil
}

// clone creates database name from template tmpl. Clones are serialized:
// PostgreSQL fails CREATE DATABASE while another session uses the template
// (SQLSTATE 55006), which is retried briefly for sessions we do not control.
func (s *server) clone(ctx context.Context, name, tmpl string) error {
	s.createMu.Lock()
	defer s.createMu.Unlock()
	conn, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", redact(s.adminURL), err)
	}
	defer conn.Close(context.Background())
	for attempt := 1; ; attempt++ {
		_, err = conn.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(tmpl))
		var pgErr *pgconn.PgError
		if err == nil || attempt == 20 || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("create database %s from template %s: %w", name, tmpl, err)
	}
	return nil
}

// drop terminates the sessions on database name and drops it. PostgreSQL 13+
// does both with DROP DATABASE ... WITH (FORCE); older servers get
// pg_terminate_backend first.
func (s *server) drop(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return fmt.Errorf("drop database %s: connect to %s: %w", name, redact(s.adminURL), err)
	}
	defer conn.Close(context.Background())
	sql := "DROP DATABASE IF EXISTS " + ident(name) + " WITH (FORCE)"
	if v, _ := strconv.Atoi(conn.PgConn().ParameterStatus("server_version_num")); v > 0 && v < 130000 {
		if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name); err != nil {
			return fmt.Errorf("drop database %s: terminate sessions: %w", name, err)
		}
		sql = "DROP DATABASE IF EXISTS " + ident(name)
	}
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// dbName returns prefix + a readable form of hint + a random suffix, within
// PostgreSQL's 63-byte identifier limit and using only [a-z0-9_].
func dbName(prefix, hint string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, r := range strings.ToLower(hint) {
		if b.Len() >= len(prefix)+36 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if hint != "" {
		b.WriteByte('_')
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	b.WriteString(hex.EncodeToString(rnd[:]))
	return b.String()
}

// withDB returns connURL (a URL or a keyword/value string) with its database
// replaced by db.
func withDB(connURL, db string) string {
	if strings.HasPrefix(connURL, "postgres://") || strings.HasPrefix(connURL, "postgresql://") {
		if u, err := url.Parse(connURL); err == nil {
			u.Path = "/" + db
			u.RawPath = ""
			return u.String()
		}
	}
	return connURL + " dbname=" + db // later keywords win; db is [a-z0-9_]
}

// redact hides the password of a URL for error messages.
func redact(connURL string) string {
	if u, err := url.Parse(connURL); err == nil && u.User != nil {
		return u.Redacted()
	}
	if strings.Contains(connURL, "password") {
		return "(connection string)"
	}
	return connURL
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// sweepOrphans stops and removes the throwaway clusters of test binaries that
// died without running Main's cleanup (a panic or a -timeout). The owner is
// the pid in owner.pid; the postmaster is SIGQUIT-ed (immediate shutdown)
// only if /proc shows it runs on that data directory. Errors are ignored:
// sweeping is best effort.
func sweepOrphans() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tmpPattern))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			// Being created right now, or a very old leftover.
			if fi, err := os.Stat(d); err != nil || time.Since(fi.ModTime()) < time.Hour {
				continue
			}
		} else if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || alive(pid) {
			continue
		}
		stopPostmaster(filepath.Join(d, "data"))
		_ = os.RemoveAll(d)
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func stopPostmaster(dataDir string) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 1 {
		return
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.Contains(string(cmdline), dataDir) {
		return
	}
	if syscall.Kill(pid, syscall.SIGQUIT) != nil {
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dataDir, "postmaster.pid")); err != nil {
			return
		}
		if !alive(pid) {
			return
		}
	}
}

// WideDAGYAML is the spec of a DAG of width independent `true` tasks,
// ids t00000…, with max_active_tasks 10000 so that no cap slows a
// throughput benchmark. Shared by the store's and the API's benchmarks.
func WideDAGYAML(dagID string, width int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "dag_id: %s\nmax_active_tasks: 10000\ntasks:\n", dagID)
	for i := 0; i < width; i++ {
		fmt.Fprintf(&sb, "  - id: t%05d\n    command: [\"true\"]\n", i)
	}
	return sb.String()
}

// Agent registers an agent in st as the API's registration does
// (store.Store.Register) and returns its id; it fails t on error. For
// tests that drive the store directly and need no credential.
func Agent(t testing.TB, st *store.Store, reg store.Registration) int64 {
	t.Helper()
	r, err := st.Register(context.Background(), reg)
	if err != nil {
		t.Fatalf("storetest: register agent %q: %v", reg.Name, err)
	}
	return r.AgentID
}

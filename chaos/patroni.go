package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// patroniBin is Debian's patroni (its script runs /usr/bin/python3).
const patroniBin = "/usr/bin/patroni"

// patroniNode is one PostgreSQL node that Patroni manages: its own data
// directory, PostgreSQL port and REST API port, and the patroni process.
type patroniNode struct {
	name    string
	dir     string
	tmp     string // its TMPDIR, which PostgreSQL inherits: how stop finds them
	pgPort  int
	apiPort int
	cmd     *exec.Cmd
	done    chan struct{}
}

// patroniPair is a primary and a synchronous standby managed by Debian's
// patroni on the chaos cluster's etcd (docs/operations.md, "PostgreSQL
// failover").
type patroniPair struct {
	dir   string
	nodes []*patroniNode
}

// patroniConfig is node n's patroni.yml: scope chaos on the etcd members
// (the v3 API), synchronous mode, a crashed primary failed over at once
// (primary_start_timeout 0) rather than restarted, failsafe mode (a
// primary that reaches its standby keeps running while etcd is down,
// rather than demote itself at every etcd fault), pg_rewind to bring the
// old primary back as a standby, trust on loopback (the harness's private
// cluster), and the commit timestamps the fencing check reads.
func patroniConfig(n *patroniNode, etcdHosts []string, binDir string) string {
	return fmt.Sprintf(`scope: chaos
name: %[1]s
log:
  level: WARNING
restapi:
  listen: 127.0.0.1:%[2]d
  connect_address: 127.0.0.1:%[2]d
etcd3:
  hosts: %[3]s
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: 1048576
    primary_start_timeout: 0
    synchronous_mode: true
    failsafe_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        track_commit_timestamp: "on"
        wal_log_hints: "on"
        max_connections: 200
        max_wal_senders: 10
        max_replication_slots: 10
        hot_standby: "on"
  initdb:
    - encoding: UTF8
    - locale: C
postgresql:
  listen: 127.0.0.1:%[4]d
  connect_address: 127.0.0.1:%[4]d
  data_dir: %[5]s
  bin_dir: %[6]s
  pgpass: %[7]s
  authentication:
    superuser:
      username: postgres
    replication:
      username: replicator
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: %[8]s
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication replicator 127.0.0.1/32 trust
`, n.name, n.apiPort, strings.Join(etcdHosts, ","), n.pgPort, filepath.Join(n.dir, "data"), binDir,
		filepath.Join(n.dir, "pgpass"), n.dir)
}

// startPatroni starts two Patroni nodes under dir on the etcd members
// etcdHosts (host:port), as the postgres OS user when the harness runs as
// root (PostgreSQL refuses root), and waits until one is the primary and
// the other its synchronous standby, then creates Vigil's role and
// database on the primary.
//
// Every process of a node carries its own TMPDIR under tmpRoot, the
// harness's, so the harness finds and ends them by pid as it does its
// agents' tasks (stop, leftovers).
func startPatroni(ctx context.Context, dir, tmpRoot string, etcdHosts []string) (*patroniPair, error) {
	pp := &patroniPair{dir: dir}
	if _, err := os.Stat(patroniBin); err != nil {
		return pp, fmt.Errorf("CHAOS_PATRONI=1 needs Debian's patroni (apt-get install patroni): %w", err)
	}
	binDir, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	for _, d := range []string{dir, tmpRoot} { // the postgres user passes through both
		if err := os.MkdirAll(d, 0o711); err != nil {
			return pp, err
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return pp, err
		}
	}
	for i := 1; i <= 2; i++ {
		name := fmt.Sprintf("pg%d", i)
		n := &patroniNode{name: name, dir: filepath.Join(dir, name), tmp: filepath.Join(tmpRoot, "patroni-"+name)}
		for _, p := range []*int{&n.pgPort, &n.apiPort} {
			a, err := freeAddr()
			if err != nil {
				return pp, err
			}
			*p, _ = strconv.Atoi(a[strings.LastIndex(a, ":")+1:])
		}
		for _, d := range []string{n.dir, n.tmp} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return pp, err
			}
			if err := chownPostgres(d); err != nil {
				return pp, err
			}
		}
		cfg := filepath.Join(n.dir, "patroni.yml")
		if err := os.WriteFile(cfg, []byte(patroniConfig(n, etcdHosts, binDir)), 0o600); err != nil {
			return pp, err
		}
		if err := chownPostgres(n.dir); err != nil {
			return pp, err
		}
		pp.nodes = append(pp.nodes, n)
	}
	for _, n := range pp.nodes {
		if err := pp.run(n); err != nil {
			return pp, err
		}
	}
	if err := pp.awaitPair(ctx, 120*time.Second); err != nil {
		return pp, err
	}
	return pp, pp.createVigil(ctx)
}

// run starts node n's patroni, its output appended to its log.
func (pp *patroniPair) run(n *patroniNode) error {
	out, err := os.OpenFile(filepath.Join(pp.dir, n.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	args := []string{patroniBin, filepath.Join(n.dir, "patroni.yml")}
	if os.Geteuid() == 0 {
		args = append([]string{"runuser", "-u", "postgres", "--"}, args...)
	}
	n.cmd = exec.Command(args[0], args[1:]...)
	n.cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + n.dir, "TMPDIR=" + n.tmp}
	n.cmd.Stdout, n.cmd.Stderr = out, out
	if err := n.cmd.Start(); err != nil {
		return fmt.Errorf("start patroni %s: %w", n.name, err)
	}
	n.done = make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(n.done) }()
	return nil
}

// member is one entry of Patroni's GET /cluster.
type patroniMember struct {
	Name  string `json:"name"`
	Role  string `json:"role"` // leader, sync_standby, replica
	State string `json:"state"`
	Port  int    `json:"port"`
}

// cluster reads Patroni's view of the pair from any node's REST API.
func (pp *patroniPair) cluster() ([]patroniMember, error) {
	var last error
	for _, n := range pp.nodes {
		cl := http.Client{Timeout: time.Second}
		resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/cluster", n.apiPort))
		if err != nil {
			last = err
			continue
		}
		var body struct {
			Members []patroniMember `json:"members"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		return body.Members, nil
	}
	return nil, last
}

// primary is the node Patroni names leader and running, and whether the
// other is its running synchronous standby.
func (pp *patroniPair) primary() (*patroniNode, bool) {
	ms, err := pp.cluster()
	if err != nil {
		return nil, false
	}
	var lead *patroniNode
	sync := false
	for _, m := range ms {
		for _, n := range pp.nodes {
			if n.name != m.Name || (m.State != "running" && m.State != "streaming") {
				continue
			}
			switch m.Role {
			case "leader":
				lead = n
			case "sync_standby":
				sync = true
			}
		}
	}
	return lead, sync
}

// awaitPair waits up to d for a primary with a synchronous standby.
func (pp *patroniPair) awaitPair(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if p, sync := pp.primary(); p != nil && sync {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	ms, err := pp.cluster()
	return fmt.Errorf("patroni: no primary with a synchronous standby within %s (members %+v, %v; logs in %s)", d, ms, err, pp.dir)
}

// hosts lists the nodes' PostgreSQL addresses.
func (pp *patroniPair) hosts() []string {
	var out []string
	for _, n := range pp.nodes {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", n.pgPort))
	}
	return out
}

// url is a multi-host URL of every node for user and db that reaches the
// primary (target_session_attrs=read-write), as Vigil's processes get it.
func (pp *patroniPair) url(hosts []string, user, db string) string {
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&target_session_attrs=read-write", user, strings.Join(hosts, ","), db)
}

// createVigil creates Vigil's role and database on the primary.
func (pp *patroniPair) createVigil(ctx context.Context) error {
	u := pp.url(pp.hosts(), "postgres", "postgres")
	if err := execSQL(ctx, u, `CREATE ROLE vigil LOGIN SUPERUSER`); err != nil {
		return fmt.Errorf("patroni: create role vigil: %w", err)
	}
	if err := execSQL(ctx, u, `CREATE DATABASE vigil OWNER vigil`); err != nil {
		return fmt.Errorf("patroni: create database vigil: %w", err)
	}
	return nil
}

// stop ends every process of the pair: SIGTERM to each (Patroni stops
// its PostgreSQL on it), up to 30 s for them to go, then SIGKILL to what
// is left. runuser does not pass a signal on, so they are found by their
// TMPDIR, not as the harness's children.
func (pp *patroniPair) stop() {
	ours := func(tmp string) bool {
		for _, n := range pp.nodes {
			if tmp == n.tmp {
				return true
			}
		}
		return false
	}
	for _, pid := range pidsWithTmp(ours) {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(30 * time.Second); len(pidsWithTmp(ours)) > 0 && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	for _, pid := range pidsWithTmp(ours) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, n := range pp.nodes {
		if n.done != nil {
			<-n.done
		}
	}
}

// postmasterPID is the pid of node n's PostgreSQL postmaster
// (postmaster.pid's first line), 0 when it is not running.
func (n *patroniNode) postmasterPID() int {
	b, err := os.ReadFile(filepath.Join(n.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pid
}

// pgBinDir is the directory of pg_ctl with its links resolved: Patroni
// needs pg_controldata and pg_rewind beside it (Debian's
// /usr/lib/postgresql/N/bin).
func pgBinDir() (string, error) {
	p, err := exec.LookPath("pg_ctl")
	if err == nil {
		p, err = filepath.EvalSymlinks(p)
	}
	if err != nil {
		return "", fmt.Errorf("patroni: pg_ctl not found: %w", err)
	}
	return filepath.Dir(p), nil
}

// chownPostgres gives dir to the postgres OS user when running as root.
func chownPostgres(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	return exec.Command("chown", "-R", "postgres:postgres", dir).Run()
}

// failover kills the Patroni primary's postmaster with SIGKILL. Patroni
// promotes the synchronous standby (primary_start_timeout 0) or, when it
// cannot fail over (it does not reach etcd, say), restarts the old
// primary in place. The fault ends when a primary, either one, takes a
// write through the multi-host URL: until then the database is down for
// everyone, and the record must say so even when no failover happened.
// failover then waits until the pair is whole again, a primary and its
// synchronous standby (at most 2 minutes, noted in the detail when it is
// not), before it returns, so the lane's next failover has somewhere to
// go.
func (c *cluster) failover(ctx context.Context, rec FaultRecord) (FaultRecord, error) {
	rec.Kind, rec.Target = PostgresFailover, "postgres"
	old, sync := c.pat.primary()
	if old == nil || !sync {
		if err := c.pat.awaitPair(ctx, 2*time.Minute); err != nil {
			return rec, err
		}
		old, _ = c.pat.primary()
	}
	pid := old.postmasterPID()
	if pid == 0 {
		return rec, fmt.Errorf("patroni: no postmaster.pid for the primary %s", old.name)
	}
	rec.Start = time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return rec, fmt.Errorf("patroni: kill -9 the primary %s's postmaster (pid %d): %w", old.name, pid, err)
	}
	for deadline := rec.Start.Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if p, _ := c.pat.primary(); p != nil && writable(ctx, c.directURL()) {
			rec.End, rec.Detail = time.Now(), old.name+" -> "+p.name
			if p == old {
				rec.Detail += " (restarted in place, no failover)"
			}
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return rec, fmt.Errorf("patroni: no primary took writes within 2m of killing %s", old.name)
		}
	}
	if err := c.pat.awaitPair(ctx, 2*time.Minute); err != nil {
		rec.Detail += "; no synchronous standby within 2m after" // the outage is over: record it all the same
	}
	return rec, nil
}

// writable reports whether url's session accepts a write now.
func writable(ctx context.Context, url string) bool {
	return queryRow(ctx, url, func(conn *pgx.Conn, qctx context.Context) error {
		_, err := conn.Exec(qctx, `CREATE TEMP TABLE chaos_writable (x int)`)
		return err
	}) == nil
}

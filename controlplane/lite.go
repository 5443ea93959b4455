package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vigil-sched/vigil/agent"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/metrics"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/pgcluster"
)

// Lite's files in DataDir besides the cluster (DataDir/pg).
const (
	agentTokenFile    = "agent.token"
	operatorTokenFile = "operator.token"
	// pgPasswordFile holds the private cluster's password
	// (pgcluster.Config.PasswordFile).
	pgPasswordFile = "postgres.password"
)

// liteDatabase makes DataDir private (privateDataDir), starts Lite's
// private PostgreSQL when cfg has no DatabaseURL (setting it, and
// DatabaseWait to 0: the cluster is up once pgcluster.Start returns), and
// reads or generates the empty tokens.
func (c *ControlPlane) liteDatabase(ctx context.Context, cfg *Config) error {
	if err := privateDataDir(cfg.DataDir, cfg.DatabaseURL == "", cfg.Logger); err != nil {
		return err
	}
	if cfg.DatabaseURL == "" {
		pg, err := pgcluster.Start(ctx, pgcluster.Config{Dir: filepath.Join(cfg.DataDir, "pg"), Logger: cfg.Logger,
			PasswordFile: filepath.Join(cfg.DataDir, pgPasswordFile)})
		if err != nil {
			return fmt.Errorf("private PostgreSQL: %w", err)
		}
		c.onStop(func(ctx context.Context) error {
			sctx, cancel := context.WithTimeout(ctx, pgStopTimeout)
			defer cancel()
			if err := pg.Stop(sctx); err != nil {
				cfg.Logger.Error("stopping private PostgreSQL", "err", err)
			}
			return nil
		})
		cfg.DatabaseURL, cfg.DatabaseWait = pg.URL("vigil"), 0
		cfg.Logger.Info("private PostgreSQL started", "dir", pg.Dir(), "port", pg.Port())
	}
	var err error
	if cfg.AgentToken, err = tokenOrGenerate(cfg.AgentToken, cfg.DataDir, agentTokenFile); err != nil {
		return err
	}
	cfg.OperatorToken, err = tokenOrGenerate(cfg.OperatorToken, cfg.DataDir, operatorTokenFile)
	return err
}

// privateDataDir makes Lite's data directory, which holds its tokens, the
// cluster's password and the cluster, reachable by Vigil's user alone:
// the directory 0700 (root:postgres 0710 as root with a private cluster,
// pgcluster.PrivateParent), and every file directly in it 0600. A data
// directory an older Vigil left wider is tightened, each change logged,
// rather than refused: its contents were always Vigil's alone to read.
func privateDataDir(dir string, cluster bool, log *slog.Logger) error {
	if err := pgcluster.PrivateParent(dir, cluster, log); err != nil {
		return &FieldError{Field: "DataDir", Err: err, text: func(name string) string {
			return fmt.Sprintf("%s %s: %v", name, dir, err)
		}}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fieldError("DataDir", err, "")
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return fieldError("DataDir", err, "")
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			path := filepath.Join(dir, e.Name())
			if err := os.Chmod(path, perm&0o700); err != nil {
				return fieldError("DataDir", err, "")
			}
			log.Info("made a data directory file private", "file", path, "was", fmt.Sprintf("%04o", perm), "now", fmt.Sprintf("%04o", perm&0o700))
		}
	}
	return nil
}

// elector returns how to build cfg's elector once the metrics exist: a
// static one for Lite, an etcd one for Pro (whose client Stop closes).
func (c *ControlPlane) elector(cfg Config, st *store.Store) (func(*metrics.Metrics) (leader.Elector, error), error) {
	if cfg.Pro == nil {
		return func(m *metrics.Metrics) (leader.Elector, error) {
			return leader.NewStatic(st, ReplicaID(), cfg.Logger, m), nil
		}, nil
	}
	return c.proElector(cfg, st)
}

// startLocalAgents runs cfg.Agents against the API through the same HTTP
// protocol as remote ones; Stop cancels them and waits for them to drain.
// An agent's refused Config (a task user that does not exist) fails the
// start, naming the field.
func (c *ControlPlane) startLocalAgents(cfg Config, server localAPI) error {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	c.onStop(func(context.Context) error {
		cancel()
		wg.Wait()
		return nil
	})
	host, _ := os.Hostname()
	for i := 1; i <= cfg.Agents.Count; i++ {
		a, err := agent.New(agent.Config{
			// The pid makes the names this process's own: a restarted
			// Lite must not need the credentials of its predecessor's
			// agents, whose registrations stay live for one agent-lost
			// threshold (a name held by a live agent is refused).
			Servers: []string{server.url}, HTTPClient: server.client, Token: cfg.AgentToken,
			Name: fmt.Sprintf("%s-%d-lite-%d", host, os.Getpid(), i),
			Tags: cfg.Agents.Tags, Capacity: cfg.Agents.Capacity, ClaimWindow: cfg.Agents.ClaimWindow,
			DrainTimeout: cfg.Agents.DrainTimeout, TaskUser: cfg.Agents.TaskUser, TaskUsersAllowed: cfg.Agents.TaskUsersAllowed,
			Logger: cfg.Logger, // the agent adds its name; "agent", i would be a third id
		})
		if err != nil {
			return fieldError("Agents", err, "")
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Run(ctx); err != nil {
				cfg.Logger.Error("in-process agent stopped", "agent", i, "err", err)
			}
		}()
	}
	return nil
}

// applyDAGs validates every spec under path before storing any.
func applyDAGs(ctx context.Context, st *store.Store, path string, log *slog.Logger) error {
	specs, err := dag.LoadPaths(path)
	if err != nil {
		return fieldError("DAGs", err, "")
	}
	for _, spec := range specs {
		res, err := st.ApplyDAG(ctx, spec)
		if err != nil {
			return err
		}
		log.Info("dag applied", "dag_id", spec.DAGID, "result", res)
	}
	return nil
}

// tokenOrGenerate returns explicit, else the token stored in dir/name,
// else a new random token written there with mode 0600.
func tokenOrGenerate(explicit, dir, name string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	path := filepath.Join(dir, name)
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(buf)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", &FieldError{Field: "DataDir", Err: err, text: func(name string) string {
			return fmt.Sprintf("%s %s: %v", name, dir, err)
		}}
	}
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return tok, nil
}

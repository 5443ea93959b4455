package controlplane

import (
	"crypto/tls"
	"log/slog"
	"time"

	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/notify"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/scheduler"
	"github.com/vigil-sched/vigil/store"
)

// Defaults and bounds of Config (docs/configuration.md lists the flags
// that set them).
const (
	// DefaultListen is Config.Listen's default.
	DefaultListen = "127.0.0.1:8080"
	// BulkReserve is how many main-pool connections the default BulkLimit
	// leaves to operator, health and other requests.
	BulkReserve = 4
	// MaxLocalAgents bounds LocalAgents.Count.
	MaxLocalAgents = 64
	// MinHeartbeatInterval and MaxHeartbeatInterval bound
	// Config.HeartbeatInterval: agents beat at least every 2 minutes, and
	// at most every second (each beat is a statement per agent).
	MinHeartbeatInterval = time.Second
	MaxHeartbeatInterval = 2 * time.Minute
	// DefaultVersion is Config.Version's default.
	DefaultVersion = "dev"
	// shutdownTimeout bounds handing leadership over and closing the API.
	shutdownTimeout = 10 * time.Second
	// pgStopTimeout bounds stopping Lite's private PostgreSQL.
	pgStopTimeout = 30 * time.Second
	// etcdDialTimeout bounds Pro's first dial of etcd.
	etcdDialTimeout = 5 * time.Second
)

// Config is one control plane: where its state lives, where it serves, and
// how it elects its leader. Pro is nil for Lite (a static election,
// in-process agents, and a private PostgreSQL when DatabaseURL is empty);
// set for a Pro replica (an etcd election). Zero fields take the default
// their comment gives. Start validates it; errors name the field.
type Config struct {
	// Logger receives the control plane's logs; default slog.Default().
	Logger *slog.Logger
	// Version is what GET /v1/version and the cluster rows report; default
	// DefaultVersion.
	Version string

	// DatabaseURL is the PostgreSQL URL; required for Pro. Empty in Lite
	// starts a private cluster under DataDir/pg, stopped by Stop.
	DatabaseURL string
	// DatabaseWait is how long start-up keeps retrying an unreachable
	// DatabaseURL (connect and migrate) before it gives up; 0 tries once,
	// negative is refused. The private cluster is up before it is used:
	// no wait.
	DatabaseWait time.Duration
	// DataDir holds Lite's private cluster and the token files it
	// generates (empty: the working directory); required in Lite when
	// DatabaseURL is empty.
	DataDir string
	// LeaderTimeouts bound the leader's PostgreSQL sessions; zero fields
	// are derived from the election TTL (store.DefaultLeaderTimeouts).
	LeaderTimeouts store.LeaderTimeouts
	// Pools sizes the store's pools; zero fields take the URL's
	// pool_max_conns or the store's defaults (store.Pools).
	Pools store.Pools
	// BulkLimit bounds the agent claims, completions and log batches that
	// use the main pool at once; 0: the main pool's size minus
	// BulkReserve, at least 1.
	BulkLimit int

	// Listen is the API's TCP address; default DefaultListen. Port 0
	// takes a free port (ControlPlane.URL names it).
	Listen string
	// TLS, when set, serves HTTPS; in Lite the in-process agents then use
	// an in-process listener and need no certificate.
	TLS *tls.Config

	// AgentToken and OperatorToken are the bearer tokens of agents and
	// operators; required for Pro. Empty in Lite: read from, or generated
	// into, DataDir/agent.token and DataDir/operator.token (mode 0600).
	AgentToken, OperatorToken string
	// ViewerToken is the optional read-only role's token; it must differ
	// from the other two.
	ViewerToken string
	// AgentTokensFile, optional, is the agent tokens file (package
	// agenttoken): agent tokens each limited to a list of tags. It is
	// reread on SIGHUP and, checked every AgentTokensPoll (0:
	// hashfile.DefaultPollInterval), when it changes; a reread that
	// fails keeps the previous tokens. AgentToken stays the token for all
	// tags.
	AgentTokensFile string
	AgentTokensPoll time.Duration
	// UsersFile, optional, is the users file (package identity): named
	// identities each with a role and the hash of its token. It is reread
	// like AgentTokensFile, every UsersPoll (0:
	// hashfile.DefaultPollInterval). OperatorToken stays the identity
	// "operator" (admin) and ViewerToken the identity "viewer".
	UsersFile string
	UsersPoll time.Duration

	// TickInterval is the scheduler's tick; default
	// scheduler.DefaultInterval, 10ms..1m.
	TickInterval time.Duration
	// HeartbeatInterval is told to agents; default
	// scheduler.DefaultHeartbeatInterval, within MinHeartbeatInterval..
	// MaxHeartbeatInterval.
	HeartbeatInterval time.Duration
	// Thresholds are the reapers'; zero: reaper.DefaultThresholds().
	Thresholds reaper.Thresholds
	// SweepInterval is how often the reapers run; default
	// scheduler.DefaultSweepInterval.
	SweepInterval time.Duration
	// Retention is the leader's pruning; a zero age disables that
	// category (scheduler.Retention).
	Retention scheduler.Retention
	// MassSilence is the reapers' brake; nil: reaper.DefaultMassSilence().
	MassSilence *reaper.MassSilence

	// SecretsKeyFile holds the key that seals the cluster's named secrets
	// (package secrets: 32 random bytes, raw or as 64 hex characters, mode
	// 0600). Empty: Lite uses DataDir/secrets.key, generated when absent;
	// a Pro replica serves no secrets (the routes answer
	// secrets_disabled, and a DAG naming one is refused at apply).
	SecretsKeyFile string

	// Notify configures webhook delivery and SLA checks (package notify;
	// docs/notifications.md): the external URL of payload links, the
	// retry back-off and max age. Start fills Store, Metrics, Logger,
	// Secrets and Wake.
	Notify notify.Config

	// DAGs is a folder (or file) of DAG specs applied at start-up, all
	// validated before any is stored; empty applies none.
	DAGs string

	// Agents are Lite's in-process agents; ignored for Pro.
	Agents LocalAgents
	// Pro, when set, makes this a Pro replica.
	Pro *Pro
}

// LocalAgents are Lite's in-process agents: they reach the API through the
// same HTTP protocol as remote ones (agent.Config has the details).
type LocalAgents struct {
	// Count is how many; 0..MaxLocalAgents.
	Count int
	// Capacity is each one's concurrent TIs; 0: agent.Config's default.
	Capacity int
	// Tags are their tags.
	Tags []string
	// ClaimWindow is agent.Config.ClaimWindow (0: its default,
	// agent.ClaimWindowOff: claim at once).
	ClaimWindow time.Duration
	// DrainTimeout is how long Stop lets their running tasks finish.
	DrainTimeout time.Duration
	// TaskUser and TaskUsersAllowed are agent.Config's: the OS user their
	// tasks run as, and those a task's run_as_user may name. Both need
	// root (docs/task-environment.md).
	TaskUser         string
	TaskUsersAllowed []string
}

// Pro is a Pro replica's election through etcd (docs/design.md §8).
type Pro struct {
	// Endpoints are etcd's client URLs; at least one.
	Endpoints []string
	// TLS, when set, is the etcd client's TLS (CA, client certificate).
	TLS *tls.Config
	// Username and Password are etcd's auth, if enabled.
	Username, Password string
	// ElectionTTL is the session lease TTL; default
	// leader.DefaultElectionTTL, whole seconds within
	// leader.MinElectionTTL..MaxElectionTTL.
	ElectionTTL time.Duration
	// ReplicaID is this replica's unique id; default hostname-pid.
	ReplicaID string
}

// withDefaults fills the zero fields Start resolves itself; the parts it
// assembles fill their own.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = scheduler.DefaultHeartbeatInterval
	}
	if c.TickInterval == 0 {
		c.TickInterval = scheduler.DefaultInterval
	}
	if c.Pro != nil {
		p := *c.Pro
		if p.ElectionTTL == 0 {
			p.ElectionTTL = leader.DefaultElectionTTL
		}
		if p.ReplicaID == "" {
			p.ReplicaID = ReplicaID()
		}
		c.Pro = &p
	}
	return c
}

// electionTTL is the TTL the leader timeouts and the failover rule are
// judged against: Pro's, or 0 for Lite (the store's default).
func (c Config) electionTTL() time.Duration {
	if c.Pro == nil {
		return 0
	}
	return c.Pro.ElectionTTL
}

// storeOptions are the store's options of c.
func (c Config) storeOptions() store.Options {
	return store.Options{ElectionTTL: c.electionTTL(), LeaderTimeouts: c.LeaderTimeouts, Pools: c.Pools}
}

// validate checks the fields Start uses itself (the scheduler, the API and
// the elector check theirs); c has its defaults.
func (c Config) validate() error {
	switch {
	case c.DatabaseWait < 0:
		return fieldError("DatabaseWait", nil, "%s is negative; want 0 (try once) or a positive duration", c.DatabaseWait)
	case c.ViewerToken != "" && (c.ViewerToken == c.OperatorToken || c.ViewerToken == c.AgentToken):
		return fieldError("ViewerToken", nil, "must differ from OperatorToken and AgentToken, or the read-only role could change state")
	case c.HeartbeatInterval < MinHeartbeatInterval || c.HeartbeatInterval > MaxHeartbeatInterval:
		return fieldError("HeartbeatInterval", nil, "%s is outside 1s..2m", c.HeartbeatInterval)
	case c.BulkLimit < 0:
		return fieldError("BulkLimit", nil, "%d is negative; 0 takes the default", c.BulkLimit)
	}
	if _, err := c.LeaderTimeouts.Resolve(c.electionTTL()); err != nil {
		return fieldError("LeaderTimeouts", err, "")
	}
	pools, err := c.Pools.Resolve()
	if err != nil {
		return fieldError("Pools", err, "")
	}
	if c.BulkLimit > pools.MaxConns {
		return fieldError("BulkLimit", nil, "%d is above the main pool's %d connections", c.BulkLimit, pools.MaxConns)
	}
	if c.Pro != nil {
		return c.validatePro()
	}
	switch {
	case c.DataDir == "" && c.DatabaseURL == "":
		return fieldError("DataDir", nil, "required when DatabaseURL is empty (the private PostgreSQL lives there)")
	case c.Agents.Count < 0 || c.Agents.Count > MaxLocalAgents:
		return fieldError("Agents.Count", nil, "%d is outside 0..%d", c.Agents.Count, MaxLocalAgents)
	case c.Agents.DrainTimeout < 0:
		return fieldError("Agents.DrainTimeout", nil, "must not be negative")
	}
	return nil
}

func (c Config) validatePro() error {
	switch {
	case c.DatabaseURL == "":
		return fieldError("DatabaseURL", nil, "required for Pro")
	case len(c.Pro.Endpoints) == 0:
		return fieldError("Pro.Endpoints", nil, "at least one etcd endpoint is required")
	case c.AgentToken == "":
		return fieldError("AgentToken", nil, "required for Pro")
	case c.OperatorToken == "":
		return fieldError("OperatorToken", nil, "required for Pro")
	}
	return nil
}

// bulkLimit resolves BulkLimit against the main pool's size.
func (c Config) bulkLimit() int {
	if c.BulkLimit > 0 {
		return c.BulkLimit
	}
	pools, _ := c.Pools.Resolve() // validate checked it
	return max(1, pools.MaxConns-BulkReserve)
}

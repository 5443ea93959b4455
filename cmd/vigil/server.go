package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/vigil-sched/vigil/controlplane"
	"github.com/vigil-sched/vigil/leader"
	"github.com/vigil-sched/vigil/reaper"
)

// serverOpts are the flags of `vigil server` (docs/design.md §1, §8, §9).
type serverOpts struct {
	databaseURL       string
	etcdEndpoints     []string
	etcdCACert        string
	etcdCert, etcdKey string
	etcdUser, etcdPW  string
	electionTTL       time.Duration
	replicaID         string
	databaseWait      time.Duration // --database-wait (dbwait.go)
	planeOpts
}

func newServerCmd() *cobra.Command {
	o := &serverOpts{}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a Pro replica: serves the API; leads (scheduler and reapers) when elected through etcd",
		Args:  noArgs,
	}
	cmd.RunE = runE(o.validate, func(ctx context.Context, log *slog.Logger) error { return runServer(ctx, o, log) })
	f := cmd.Flags()
	f.StringVar(&o.databaseURL, "database-url", "", "PostgreSQL URL (required)")
	f.StringSliceVar(&o.etcdEndpoints, "etcd-endpoints", nil, "etcd endpoints, comma-separated (required)")
	f.StringVar(&o.etcdCACert, "etcd-cacert", "", "CA certificate (PEM) to verify etcd's TLS certificate")
	f.StringVar(&o.etcdCert, "etcd-cert", "", "client certificate (PEM) for etcd mutual TLS")
	f.StringVar(&o.etcdKey, "etcd-key", "", "client key (PEM) for etcd mutual TLS")
	f.StringVar(&o.etcdUser, "etcd-username", "", "etcd username (etcd auth)")
	f.StringVar(&o.etcdPW, "etcd-password", "", "etcd password (etcd auth)")
	f.DurationVar(&o.electionTTL, "election-ttl", leader.DefaultElectionTTL, "etcd session TTL: a dead leader is replaced within about this long (whole seconds)")
	f.StringVar(&o.replicaID, "replica-id", controlplane.ReplicaID(), "this replica's unique id (default hostname-pid)")
	addDatabaseWaitFlag(f, &o.databaseWait)
	addPlaneFlags(cmd, &o.planeOpts, " (required)")
	o.secretFiles = append(o.secretFiles, addSecretFile(f, "etcd-password", &o.etcdPW))
	return cmd
}

func (o *serverOpts) validate() error {
	if err := resolveSecrets(o.secretFiles...); err != nil {
		return err
	}
	switch {
	case o.databaseURL == "":
		return usageError("--database-url: required for vigil server")
	case len(o.etcdEndpoints) == 0:
		return usageError("--etcd-endpoints: at least one etcd endpoint is required")
	case o.agentToken == "" || o.operatorToken == "":
		return usageError("--agent-token and --operator-token (or their -file twins): both are required for vigil server")
	case o.replicaID == "":
		return usageError("--replica-id: must not be empty")
	case (o.etcdCert == "") != (o.etcdKey == ""):
		return usageError("--etcd-cert and --etcd-key: give both or neither")
	}
	if o.electionTTL < leader.MinElectionTTL || o.electionTTL > leader.MaxElectionTTL || o.electionTTL%time.Second != 0 {
		return usageError("--election-ttl: %s must be whole seconds between %s and %s",
			o.electionTTL, leader.MinElectionTTL, leader.MaxElectionTTL)
	}
	if err := validateDatabaseWait(o.databaseWait); err != nil {
		return err
	}
	if err := o.validateLeaderTimeouts(o.electionTTL); err != nil {
		return err
	}
	if err := o.planeOpts.validate(); err != nil {
		return err
	}
	// The failover rule: a healthy agent on a frozen replica must not be
	// reaped before it has moved to another (docs/scheduler-resilience.md).
	tm := reaper.Timing{HeartbeatInterval: o.heartbeatInterval, ElectionTTL: o.electionTTL}
	if err := o.recovery.thresholds().ValidateTiming(tm); err != nil {
		return usageError("%v", nameThresholdFields(err, o.recovery.flags))
	}
	return nil
}

// etcdTLS builds the client TLS config from the flags; nil when none given.
func (o *serverOpts) etcdTLS() (*tls.Config, error) {
	if o.etcdCACert == "" && o.etcdCert == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.etcdCACert != "" {
		pem, err := os.ReadFile(o.etcdCACert)
		if err != nil {
			return nil, usageError("--etcd-cacert: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageError("--etcd-cacert: %s holds no PEM certificate", o.etcdCACert)
		}
		cfg.RootCAs = pool
	}
	if o.etcdCert != "" {
		pair, err := tls.LoadX509KeyPair(o.etcdCert, o.etcdKey)
		if err != nil {
			return nil, usageError("--etcd-cert/--etcd-key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func runServer(ctx context.Context, o *serverOpts, log *slog.Logger) error {
	tlsCfg, err := o.etcdTLS()
	if err != nil {
		return err
	}
	cfg, err := o.config(log)
	if err != nil {
		return err
	}
	cfg.DatabaseURL, cfg.DatabaseWait = o.databaseURL, o.databaseWait
	cfg.Pro = &controlplane.Pro{
		Endpoints: o.etcdEndpoints, TLS: tlsCfg, Username: o.etcdUser, Password: o.etcdPW,
		ElectionTTL: o.electionTTL, ReplicaID: o.replicaID,
	}
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return startError(ctx, log, err, o.recovery.flags)
	}
	log.Info("vigil server ready", "api", cp.URL(), "replica", o.replicaID, "etcd", o.etcdEndpoints)
	<-ctx.Done()
	log.Info("shutting down: resigning leadership")
	return cp.Stop(context.Background())
}

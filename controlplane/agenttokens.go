package controlplane

import (
	"context"
	"os"
	ossignal "os/signal"
	"syscall"
	"time"

	"github.com/vigil-sched/vigil/agenttoken"
	"github.com/vigil-sched/vigil/identity"
)

// builtinTokens are the tokens of Config by field, which no entry of the
// agent tokens or users file may repeat: that token would still speak for
// its own role, and the entry would be dead.
func builtinTokens(cfg Config) map[string]string {
	return map[string]string{"AgentToken": cfg.AgentToken, "OperatorToken": cfg.OperatorToken, "ViewerToken": cfg.ViewerToken}
}

// agentTokens loads Config.AgentTokensFile (nil without one), refuses an
// entry whose hash is a built-in token's, and rereads the file on SIGHUP
// and when it changes until Stop.
func (c *ControlPlane) agentTokens(cfg Config) (*agenttoken.Set, error) {
	if cfg.AgentTokensFile == "" {
		return nil, nil
	}
	set, err := agenttoken.Load(cfg.AgentTokensFile, cfg.Logger)
	if err != nil {
		return nil, fieldError("AgentTokensFile", err, "")
	}
	for field, tok := range builtinTokens(cfg) {
		if name := set.Collides(tok); name != "" {
			return nil, fieldError("AgentTokensFile", nil, "entry %q: token_sha256 is the hash of the %s; a scoped token must be a token of its own", name, field)
		}
	}
	c.watch(set.Watch, cfg.AgentTokensPoll)
	cfg.Logger.Info("agent tokens file loaded", "file", cfg.AgentTokensFile)
	return set, nil
}

// users loads Config.UsersFile (nil without one), refuses an entry whose
// hash is a built-in token's, counts failed rereads in
// vigil_users_file_reload_failures_total, and rereads the file on SIGHUP
// and when it changes until Stop.
func (c *ControlPlane) users(cfg Config, failed func()) (*identity.Set, error) {
	if cfg.UsersFile == "" {
		return nil, nil
	}
	set, err := identity.Load(cfg.UsersFile, cfg.Logger)
	if err != nil {
		return nil, fieldError("UsersFile", err, "")
	}
	for field, tok := range builtinTokens(cfg) {
		if name := set.Collides(tok); name != "" {
			return nil, fieldError("UsersFile", nil, "entry %q: token_sha256 is the hash of the %s; an identity needs a token of its own", name, field)
		}
	}
	set.OnReload(func(err error) {
		if err != nil {
			failed()
		}
	})
	c.watch(set.Watch, cfg.UsersPoll)
	cfg.Logger.Info("users file loaded", "file", cfg.UsersFile)
	return set, nil
}

// watch runs a file's Watch with SIGHUP until Stop.
func (c *ControlPlane) watch(run func(ctx context.Context, hup <-chan os.Signal, poll time.Duration), poll time.Duration) {
	hup := make(chan os.Signal, 1)
	ossignal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx, hup, poll) }()
	c.onStop(func(context.Context) error {
		ossignal.Stop(hup)
		cancel()
		<-done
		return nil
	})
}

package controlplane

import (
	"context"
	"os"
	ossignal "os/signal"
	"syscall"

	"github.com/vigil-sched/vigil/agenttoken"
)

// agentTokens loads Config.AgentTokensFile (nil without one), refuses an
// entry whose hash is another role's token (that token would still speak
// for its role, and the entry would be dead), and rereads the file on
// SIGHUP and when it changes until Stop.
func (c *ControlPlane) agentTokens(cfg Config) (*agenttoken.Set, error) {
	if cfg.AgentTokensFile == "" {
		return nil, nil
	}
	set, err := agenttoken.Load(cfg.AgentTokensFile, cfg.Logger)
	if err != nil {
		return nil, fieldError("AgentTokensFile", err, "")
	}
	for field, tok := range map[string]string{"AgentToken": cfg.AgentToken, "OperatorToken": cfg.OperatorToken, "ViewerToken": cfg.ViewerToken} {
		if name := set.Collides(tok); name != "" {
			return nil, fieldError("AgentTokensFile", nil, "entry %q: token_sha256 is the hash of the %s; a scoped token must be a token of its own", name, field)
		}
	}
	hup := make(chan os.Signal, 1)
	ossignal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); set.Watch(ctx, hup, cfg.AgentTokensPoll) }()
	c.onStop(func(context.Context) error {
		ossignal.Stop(hup)
		cancel()
		<-done
		return nil
	})
	cfg.Logger.Info("agent tokens file loaded", "file", cfg.AgentTokensFile)
	return set, nil
}

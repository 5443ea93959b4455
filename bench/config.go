package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	vagent "github.com/vigil-sched/vigil/agent"
	"github.com/vigil-sched/vigil/dag"
)

// config is what one `make bench` run measures. The defaults are the
// scale docs/performance.md reports; every field has a flag so that a
// smaller run (a laptop, a smoke test) needs no code change.
type config struct {
	// Repo is the Vigil checkout to build `vigil` and bench/river from.
	Repo string
	// HistoryRuns terminal runs of seedWidth TIs each are seeded (20,000:
	// 1M terminal TIs); LiveRuns running runs of seedWidth TIs (4,000).
	HistoryRuns, LiveRuns int
	// BurnDown is the number of no-op TIs triggered before the synthetic
	// agents start (rounded up to whole runs of wideWidth).
	BurnDown int
	// Steady is how long each steady measurement counts completions.
	Steady time.Duration
	// Agents synthetic HTTP agents of Capacity slots each drive the
	// synthetic figures.
	Agents, Capacity int
	// ClaimWindow is the claim window of the synthetic agents and of
	// `vigil lite`'s in-process agents (agent.Config.ClaimWindow); 0
	// claims as soon as one slot is free.
	ClaimWindow time.Duration
	// LiteBurnDown, LiteAgents and LiteCapacity are the same for `vigil
	// lite` with in-process agents running `true`.
	LiteBurnDown, LiteAgents, LiteCapacity int
	// HeartbeatTIs running TIs are heartbeated by HeartbeatAgents agents
	// (an equal share each) for HeartbeatFor.
	HeartbeatTIs, HeartbeatAgents int
	HeartbeatFor                  time.Duration
	// StaleTIs running TIs of silent agents are reaped; PruneAgents
	// inactive agents are pruned; ChainLen is the length of the chain
	// whose inter-task latency is measured.
	StaleTIs, PruneAgents, ChainLen int
	// RiverJobs is River's burn-down.
	RiverJobs int
	// LogLines is how many lines the log ingest figure's task prints.
	LogLines int
	// APIRuns terminal runs holding APITIs TIs in all (spread evenly) are
	// the year of history `-only api-history` seeds before timing the
	// API's reads (issue 27).
	APIRuns, APITIs int
	// Only runs one phase alone, with no other seed or figure and no
	// River: "log-ingest" (a quick check of the log path),
	// "api-history" (the API's reads at a year of history) or "lite" (the
	// process-start rate and the Lite figures).
	Only string
	// PhaseTimeout bounds every wait for work to finish; a burn-down cut
	// by it is reported as such, with the rate over what did finish.
	PhaseTimeout time.Duration
	// KeepDir keeps the work directory (cluster, logs) for inspection.
	KeepDir bool
}

// defaultConfig is the scale of docs/performance.md.
func defaultConfig() config {
	return config{
		Repo: ".", HistoryRuns: 20000, LiveRuns: 4000,
		BurnDown: 100000, Steady: 20 * time.Second, Agents: 4, Capacity: 128, ClaimWindow: vagent.DefaultClaimWindow,
		LiteBurnDown: 10000, LiteAgents: 4, LiteCapacity: 32,
		HeartbeatTIs: 100000, HeartbeatAgents: 100, HeartbeatFor: 10 * time.Second,
		StaleTIs: 10000, PruneAgents: 500, ChainLen: 50,
		RiverJobs: 100000, LogLines: 1000000, PhaseTimeout: 4 * time.Minute,
		APIRuns: 1000000, APITIs: 20000000,
	}
}

// parseConfig reads the command line (args without the program name).
// Errors name the flag, its value and the rule.
func parseConfig(args []string, stderr io.Writer) (config, error) {
	c := defaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Repo, "repo", c.Repo, "Vigil checkout to build vigil and bench/river from")
	fs.IntVar(&c.HistoryRuns, "history-runs", c.HistoryRuns, "terminal runs of 50 TIs seeded as history")
	fs.IntVar(&c.LiveRuns, "live-runs", c.LiveRuns, "running runs of 50 TIs seeded as live work")
	fs.IntVar(&c.BurnDown, "burn-down", c.BurnDown, "no-op TIs in the synthetic burn-down (whole runs of 1,000)")
	fs.DurationVar(&c.Steady, "steady", c.Steady, "length of each steady measurement")
	fs.IntVar(&c.Agents, "agents", c.Agents, "synthetic HTTP agents")
	fs.IntVar(&c.Capacity, "capacity", c.Capacity, "slots of each synthetic agent")
	fs.DurationVar(&c.ClaimWindow, "claim-window", c.ClaimWindow, "claim window of the synthetic and the Lite agents (0 = claim at once)")
	fs.IntVar(&c.LiteBurnDown, "lite-burn-down", c.LiteBurnDown, "TIs in the vigil lite burn-down (whole runs of 1,000)")
	fs.IntVar(&c.LiteAgents, "lite-agents", c.LiteAgents, "in-process agents of vigil lite (1..64)")
	fs.IntVar(&c.LiteCapacity, "lite-capacity", c.LiteCapacity, "capacity of each in-process agent (1..1024)")
	fs.IntVar(&c.HeartbeatTIs, "heartbeat-tis", c.HeartbeatTIs, "running TIs heartbeated in the ingest measurement")
	fs.IntVar(&c.HeartbeatAgents, "heartbeat-agents", c.HeartbeatAgents, "agents sharing those TIs, one request in flight each")
	fs.DurationVar(&c.HeartbeatFor, "heartbeat-for", c.HeartbeatFor, "length of the heartbeat ingest measurement")
	fs.IntVar(&c.StaleTIs, "stale-tis", c.StaleTIs, "running TIs of silent agents to reap")
	fs.IntVar(&c.PruneAgents, "prune-agents", c.PruneAgents, "inactive agents to prune (10 historical TIs each)")
	fs.IntVar(&c.ChainLen, "chain", c.ChainLen, "tasks in the inter-task latency chain")
	fs.IntVar(&c.RiverJobs, "river-jobs", c.RiverJobs, "jobs in River's burn-down")
	fs.IntVar(&c.LogLines, "log-lines", c.LogLines, "lines printed by the log ingest figure's task")
	fs.IntVar(&c.APIRuns, "api-history-runs", c.APIRuns, "terminal runs seeded by -only api-history, over 365 days")
	fs.IntVar(&c.APITIs, "api-history-tis", c.APITIs, "TIs of those runs in all, spread evenly over them")
	fs.StringVar(&c.Only, "only", "", `run one phase alone: "log-ingest", "api-history" or "lite"`)
	fs.DurationVar(&c.PhaseTimeout, "phase-timeout", c.PhaseTimeout, "bound on each wait for work to finish")
	fs.BoolVar(&c.KeepDir, "keep", false, "keep the work directory (cluster data, logs)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q: bench takes flags only", fs.Arg(0))
	}
	return c, c.validate()
}

// validate reports every flag out of range, each naming its flag.
func (c config) validate() error {
	var errs []error
	atLeast := func(flag string, v, min int) {
		if v < min {
			errs = append(errs, fmt.Errorf("-%s: %d must be at least %d", flag, v, min))
		}
	}
	atLeast("history-runs", c.HistoryRuns, 1)
	atLeast("live-runs", c.LiveRuns, 1)
	atLeast("burn-down", c.BurnDown, 1)
	atLeast("agents", c.Agents, 1)
	atLeast("capacity", c.Capacity, 1)
	atLeast("lite-burn-down", c.LiteBurnDown, 1)
	atLeast("heartbeat-tis", c.HeartbeatTIs, 1)
	atLeast("heartbeat-agents", c.HeartbeatAgents, 1)
	atLeast("stale-tis", c.StaleTIs, 1)
	atLeast("prune-agents", c.PruneAgents, 1)
	atLeast("chain", c.ChainLen, 2)
	atLeast("river-jobs", c.RiverJobs, 1)
	atLeast("log-lines", c.LogLines, 1)
	if c.Only != "" && c.Only != "log-ingest" && c.Only != "api-history" && c.Only != "lite" {
		errs = append(errs, fmt.Errorf("-only: %q must be empty (every figure), log-ingest, api-history or lite", c.Only))
	}
	errs = append(errs, c.validateAPIHistory()...)
	if c.LiteAgents < 1 || c.LiteAgents > 64 {
		errs = append(errs, fmt.Errorf("-lite-agents: %d is outside 1..64 (vigil lite --agents)", c.LiteAgents))
	}
	if c.LiteCapacity < 1 || c.LiteCapacity > 1024 {
		errs = append(errs, fmt.Errorf("-lite-capacity: %d is outside 1..1024 (vigil lite --agent-capacity)", c.LiteCapacity))
	}
	if c.HeartbeatAgents > 0 && c.HeartbeatTIs%c.HeartbeatAgents != 0 {
		errs = append(errs, fmt.Errorf("-heartbeat-tis: %d is not a multiple of -heartbeat-agents %d", c.HeartbeatTIs, c.HeartbeatAgents))
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"steady", c.Steady}, {"heartbeat-for", c.HeartbeatFor}, {"phase-timeout", c.PhaseTimeout}} {
		if d.v < time.Second {
			errs = append(errs, fmt.Errorf("-%s: %s must be at least 1s", d.flag, d.v))
		}
	}
	if c.HistoryRuns*seedWidth < c.PruneAgents*prunableTIs {
		errs = append(errs, fmt.Errorf("-history-runs: %d runs hold %d TIs, fewer than the %d that -prune-agents %d name (%d each)",
			c.HistoryRuns, c.HistoryRuns*seedWidth, c.PruneAgents*prunableTIs, c.PruneAgents, prunableTIs))
	}
	if c.ClaimWindow < 0 || c.ClaimWindow > vagent.MaxClaimWindow {
		errs = append(errs, fmt.Errorf("-claim-window: %s is outside 0..%s", c.ClaimWindow, vagent.MaxClaimWindow))
	}
	if c.Repo == "" {
		errs = append(errs, errors.New("-repo: must not be empty"))
	}
	return errors.Join(errs...)
}

// validateAPIHistory checks -api-history-runs and -api-history-tis: every
// history DAG gets a run, every run a TI, and no run more TIs than a DAG
// may have tasks (dag.MaxTasks).
func (c config) validateAPIHistory() []error {
	var errs []error
	if c.APIRuns < apiDAGs {
		errs = append(errs, fmt.Errorf("-api-history-runs: %d must be at least %d (one run for each history DAG)", c.APIRuns, apiDAGs))
	}
	if c.APITIs < c.APIRuns {
		errs = append(errs, fmt.Errorf("-api-history-tis: %d is fewer than -api-history-runs %d (every run holds a TI)", c.APITIs, c.APIRuns))
	} else if c.APIRuns > 0 && apiWidth(c.APIRuns, c.APITIs) > dag.MaxTasks {
		errs = append(errs, fmt.Errorf("-api-history-tis: %d over %d runs is %d TIs a run, more than a DAG's %d tasks",
			c.APITIs, c.APIRuns, apiWidth(c.APIRuns, c.APITIs), dag.MaxTasks))
	}
	return errs
}

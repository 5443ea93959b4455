package chaos

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"time"
)

// Config configures one chaos run.
type Config struct {
	// Seed drives the fault plan and the workload (CHAOS_SEED). The same
	// seed gives the same plan.
	Seed int64
	// Faults is how many faults to inject (CHAOS_FAULTS, ≥ 1).
	Faults int
	// Seed2 and Faults2, when both are set, add a second phase: Faults2
	// faults drawn from Seed2 after the first phase's (the short run of
	// `make test`: a fixed seed, then a random one).
	Seed2   int64
	Faults2 int
	// Duration spreads the injections: the mean gap between two is
	// Duration/Faults (CHAOS_DURATION, a Go duration). Faults on a busy
	// lane wait for it, so the fault phase may last longer.
	Duration time.Duration
	// Agents is the number of agent processes (≥ 4).
	Agents int
	// WorkDir holds every log, the journal, PostgreSQL and etcd data.
	WorkDir string
	// VigilBin is the vigil binary to run.
	VigilBin string
	// HooksBin is vigil built with the test hooks (-tags vigil_testhooks,
	// internal/testhook): the skewed agents run it (AgentSkews). Empty: no
	// agent is skewed.
	HooksBin string
	// Report is the path of the report file.
	Report string
	// Patroni runs PostgreSQL as a primary and a synchronous standby under
	// Patroni (CHAOS_PATRONI=1, make chaos-patroni), the replicas reaching
	// the primary through a multi-host URL; its restart faults become
	// postgres_failover.
	Patroni bool
	// Timing is the cluster's timing, DefaultTiming unless set.
	Timing Timing
}

// DefaultTiming is short so that a hundred faults fit into minutes: the
// agent-lost threshold of 6s is the smallest vigil server accepts with a
// 1s heartbeat and a 2s election TTL (> TTL + 2 × interval + 1s,
// reaper.Thresholds.ValidateTiming).
var DefaultTiming = Timing{
	HeartbeatInterval: time.Second,
	AgentLost:         6 * time.Second,
	ElectionTTL:       2 * time.Second,
	Sweep:             250 * time.Millisecond,
	Tick:              200 * time.Millisecond,
	KillGrace:         2 * time.Second,
}

// Defaults of ConfigFromEnv.
const (
	DefaultFaults = 100
	defaultGap    = 1200 * time.Millisecond
)

// ConfigFromEnv reads CHAOS_SEED (an integer; empty draws a random one),
// CHAOS_FAULTS (an integer ≥ 1; default 100) and CHAOS_DURATION (a Go
// duration > 0; default 1.2s per fault) through getenv. Errors name the
// variable, its value and the rule.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	cfg := Config{Faults: DefaultFaults, Agents: 4, Timing: DefaultTiming}
	if v := getenv("CHAOS_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return cfg, fmt.Errorf("CHAOS_SEED=%q (environment): must be an integer", v)
		}
		cfg.Seed = s
	} else {
		cfg.Seed = RandomSeed()
	}
	if v := getenv("CHAOS_FAULTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("CHAOS_FAULTS=%q (environment): must be an integer ≥ 1", v)
		}
		cfg.Faults = n
	}
	cfg.Duration = time.Duration(cfg.Faults) * defaultGap
	switch v := getenv("CHAOS_PATRONI"); v {
	case "", "0":
	case "1":
		cfg.Patroni = true
	default:
		return cfg, fmt.Errorf("CHAOS_PATRONI=%q (environment): must be 1 or 0", v)
	}
	if v := getenv("CHAOS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("CHAOS_DURATION=%q (environment): must be a positive Go duration such as 3m", v)
		}
		cfg.Duration = d
	}
	return cfg, nil
}

// RandomSeed draws a positive seed from crypto/rand.
func RandomSeed() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.LittleEndian.Uint64(b[:]) >> 1)
}

// gap is the mean time between two injections.
func (c Config) gap() time.Duration { return c.Duration / time.Duration(c.Faults) }

// plan is the whole fault plan: the first phase's, then the second's
// after it, and where each phase begins (offsets from the fault phase's
// start).
func (c Config) plan() ([]Fault, []time.Duration) {
	plan := Plan(c.Seed, c.Faults, c.Agents, c.gap(), c.Timing)
	starts := []time.Duration{0}
	if c.Seed2 == 0 || c.Faults2 <= 0 {
		return plan, starts
	}
	var off time.Duration
	for _, f := range plan {
		off = max(off, f.At+f.Hold+settle(f.Kind, c.Timing))
	}
	starts = append(starts, off)
	for _, f := range Plan(c.Seed2, c.Faults2, c.Agents, c.gap(), c.Timing) {
		f.At += off
		f.Seq += len(plan)
		plan = append(plan, f)
	}
	return plan, starts
}

// seeds lists the phases' seeds.
func (c Config) seeds() []int64 {
	if c.Seed2 == 0 || c.Faults2 <= 0 {
		return []int64{c.Seed}
	}
	return []int64{c.Seed, c.Seed2}
}

package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/internal/proctest"
	"github.com/vigil-sched/vigil/internal/testhook"
)

// shortSeed is the fixed seed of the short run; a random one follows it.
const shortSeed = 20261124

// TestShortChaosRun is the short chaos run of `make test`
// (docs/reliability.md): a real Pro cluster (3 replicas, embedded etcd,
// private PostgreSQL, 4 agents, every link through toxiproxy) under 50
// faults drawn from a fixed seed, then 50 from a random seed, both
// printed; every invariant must hold. The report is printed; on failure
// the work directory is kept for the post-mortem.
func TestShortChaosRun(t *testing.T) {
	bin, hooks := buildVigil(t), buildVigilHooks(t)
	dir, err := os.MkdirTemp("", "vigil-chaos-test-*")
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("work directory kept for the post-mortem: %s (history.json, report.txt, every process's log)", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	cfg := Config{Seed: shortSeed, Faults: 50, Seed2: RandomSeed(), Faults2: 50, Duration: 60 * time.Second,
		Agents: 4, WorkDir: dir, VigilBin: bin, HooksBin: hooks, Timing: DefaultTiming}
	cfg.Report = filepath.Join(cfg.WorkDir, "report.txt")
	t.Logf("short chaos run: fixed seed %d, random seed %d; replay one with CHAOS_SEED=<seed> CHAOS_FAULTS=50 make chaos",
		cfg.Seed, cfg.Seed2)
	progress, err := os.Create(filepath.Join(cfg.WorkDir, "progress.log"))
	require.NoError(t, err)
	defer progress.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg, progress)
	if err != nil {
		t.Fatalf("chaos run (seeds %d, %d): %v\nprogress:\n%s", cfg.Seed, cfg.Seed2, err, tail(progress.Name()))
	}
	t.Log("\n" + rep.Text())
	if !assert.GreaterOrEqual(t, rep.Total(), 100, "faults injected") {
		t.Logf("faults not injected (their errors, from the progress log):\n%s", faultErrors(progress.Name()))
	}
	assert.Empty(t, rep.Violations(), "seeds %d, %d", cfg.Seed, cfg.Seed2)
	for _, res := range rep.Verdict.Results {
		assert.Positive(t, res.Checked, "invariant %s judged nothing", res.Invariant)
	}
	assertSkewed(t, rep.Verdict.Skews)
}

// assertSkewed checks that the skewed agents ran skewed: an agent ahead
// and one behind, each with log times that say so (within 5 s of its
// offset), so the run proved something about skew.
func assertSkewed(t *testing.T, seen []SkewSeen) {
	t.Helper()
	ahead, behind := 0, 0
	for _, s := range seen {
		assert.InDelta(t, s.Set.Seconds(), s.Seen.Seconds(), 5, "instance %s: clock set %s off, its log times say %s", s.Instance, s.Set, s.Seen)
		switch {
		case s.Set > 0:
			ahead++
		case s.Set < 0:
			behind++
		}
	}
	assert.Positive(t, ahead, "an agent ran with its clock ahead: %+v", seen)
	assert.Positive(t, behind, "an agent ran with its clock behind: %+v", seen)
}

// faultErrors is the progress log's lines of faults whose apply failed:
// inject logs a fault it recorded with its lag, one it did not with
// its error.
func faultErrors(path string) string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " fault ") && !strings.Contains(l, " lag ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(string(b), "\n")
	return strings.Join(lines[max(0, len(lines)-60):], "\n")
}

// buildVigil builds ./cmd/vigil, with ./cmd/vigil-supervise beside it as
// an install has it, into a temporary directory and returns vigil's path.
func buildVigil(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, proctest.Build(dir, proctest.Commands...))
	return filepath.Join(dir, "vigil")
}

// buildVigilHooks is buildVigil with the test hooks (testhook.Tag), for
// the skewed agents.
func buildVigilHooks(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, proctest.BuildTags(dir, testhook.Tag, proctest.Commands...))
	return filepath.Join(dir, "vigil")
}

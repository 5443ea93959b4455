package dag

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests in this file run the example DAGs' commands with sh, the way an
// agent would, to prove that the examples really work.

func loadExamples(t *testing.T) map[string]*Spec {
	t.Helper()
	specs, err := LoadPaths(filepath.Join("..", "examples"))
	require.NoError(t, err)
	byID := make(map[string]*Spec, len(specs))
	for _, s := range specs {
		byID[s.DAGID] = s
	}
	return byID
}

func TestExamplesLoad(t *testing.T) {
	t.Parallel()
	specs, err := LoadPaths(filepath.Join("..", "examples"))
	require.NoError(t, err)
	var ids []string
	for _, s := range specs {
		ids = append(ids, s.DAGID)
		for _, task := range s.Tasks {
			require.Len(t, task.Command, 3, "%s/%s", s.DAGID, task.ID)
			assert.Equal(t, []string{"sh", "-c"}, task.Command[:2], "%s/%s", s.DAGID, task.ID)
		}
	}
	assert.Equal(t, []string{"export", "flaky", "long", "outputs", "pipeline", "rerun", "trigger-rules"}, ids)

	byID := loadExamples(t)
	assert.Equal(t,
		[]string{"generate", "transform-0", "transform-1", "transform-2", "transform-3", "merge", "verify", "report"},
		byID["pipeline"].TopoOrder())
	for _, task := range byID["pipeline"].Tasks {
		if strings.HasPrefix(task.ID, "transform-") {
			assert.Equal(t, 1, task.Retries, task.ID)
			assert.Equal(t, []string{"generate"}, task.DependsOn, task.ID)
		}
	}
	flaky := byID["flaky"].Tasks[0]
	assert.Equal(t, 2, flaky.Retries)
	assert.Equal(t, Duration(2*time.Second), flaky.RetryDelay)
	assert.Equal(t, 1, byID["long"].Tasks[0].Retries)
}

// TestExportExamplePrintsItsConf: the params example (docs/params.md)
// takes the conf its docs trigger it with, and its task prints what the
// agent hands it as VIGIL_PARAM_<KEY>.
func TestExportExamplePrintsItsConf(t *testing.T) {
	t.Parallel()
	spec := loadExamples(t)["export"]
	conf, err := spec.CheckConf(map[string]any{"region": "us", "limit": "500"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"region": "us", "limit": int64(500), "dry_run": false}, conf)
	r := newExampleRun(t, spec, "1")
	code, out := r.run(t, "export", 1, "VIGIL_PARAM_REGION=us", "VIGIL_PARAM_LIMIT=500", "VIGIL_PARAM_DRY_RUN=false")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "export: region=us limit=500 ratio=unset dry_run=false")
}

// requireTools fails the test when a tool the examples use is missing:
// every machine Vigil supports has them, so a missing one is a broken
// machine, not a reason to pass silently.
func requireTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"sh", "awk", "sort", "sha256sum", "seq", "cut", "wc", "sed", "cmp", "diff", "cat", "mv", "rm", "mkdir", "sleep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the examples need %s: %v", tool, err)
		}
	}
}

// exampleRun runs tasks of one DAG run the way an agent does: the task's
// command with its env, plus the VIGIL_* variables, and TMPDIR pointing at
// a test directory so that the run-scoped work dir is private to the test.
type exampleRun struct {
	spec  *Spec
	tmp   string
	runID string
}

func newExampleRun(t *testing.T, spec *Spec, runID string) *exampleRun {
	return &exampleRun{spec: spec, tmp: t.TempDir(), runID: runID}
}

// workDir is the directory the examples share files through.
func (r *exampleRun) workDir() string {
	return filepath.Join(r.tmp, "vigil-examples", r.spec.DAGID, r.runID)
}

func (r *exampleRun) task(id string) Task {
	for _, task := range r.spec.Tasks {
		if task.ID == id {
			return task
		}
	}
	panic("no task " + id)
}

// run executes one try of a task and returns its exit code and output.
func (r *exampleRun) run(t *testing.T, id string, try int, envOverride ...string) (int, string) {
	t.Helper()
	code, out, err := r.exec(t.Context(), id, try, envOverride...)
	require.NoError(t, err, "running %s:\n%s", id, out)
	return code, out
}

// exec is run without the test: safe to call from any goroutine.
func (r *exampleRun) exec(ctx context.Context, id string, try int, envOverride ...string) (int, string, error) {
	task := r.task(id)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, task.Command[0], task.Command[1:]...)
	cmd.Dir = r.tmp
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMPDIR=") && !strings.HasPrefix(kv, "VIGIL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range task.Env {
		cmd.Env = append(cmd.Env, k+"="+v.Value)
	}
	cmd.Env = append(cmd.Env, envOverride...)
	cmd.Env = append(cmd.Env,
		"TMPDIR="+r.tmp,
		"VIGIL_RUN_ID="+r.runID,
		"VIGIL_DAG_ID="+r.spec.DAGID,
		"VIGIL_TASK_ID="+id,
		fmt.Sprint("VIGIL_TRY_NUMBER=", try),
	)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && ctx.Err() == nil {
		return exit.ExitCode(), string(out), nil
	}
	return 0, string(out), err
}

// runAll runs every task once, in waves: a task starts when all it depends
// on have succeeded, and the tasks of a wave run in parallel, as on agents.
// It fails the test on the first task that exits non-zero and returns each
// task's output.
func (r *exampleRun) runAll(t *testing.T) map[string]string {
	t.Helper()
	outputs := make(map[string]string)
	done := make(map[string]bool)
	for len(done) < len(r.spec.Tasks) {
		var wave []string
		for _, id := range r.spec.TopoOrder() {
			task := r.task(id)
			ready := !done[id]
			for _, d := range task.DependsOn {
				ready = ready && done[d]
			}
			if ready {
				wave = append(wave, id)
			}
		}
		require.NotEmpty(t, wave)
		codes := make([]int, len(wave))
		outs := make([]string, len(wave))
		errs := make([]error, len(wave))
		var wg sync.WaitGroup
		for i, id := range wave {
			wg.Go(func() { codes[i], outs[i], errs[i] = r.exec(t.Context(), id, 1) })
		}
		wg.Wait()
		for i, id := range wave {
			require.NoError(t, errs[i], "running %s:\n%s", id, outs[i])
			t.Logf("%s exited %d:\n%s", id, codes[i], outs[i])
			require.Equal(t, 0, codes[i], "%s failed:\n%s", id, outs[i])
			outputs[id] = outs[i]
			done[id] = true
		}
	}
	return outputs
}

func TestExamplePipelineRuns(t *testing.T) {
	t.Parallel()
	requireTools(t)
	r := newExampleRun(t, loadExamples(t)["pipeline"], "run-1")
	start := time.Now()
	outputs := r.runAll(t)
	t.Logf("pipeline ran in %s", time.Since(start))

	assert.Contains(t, outputs["verify"], "verify: ok: 200000 records")
	assert.Contains(t, outputs["report"], "total      200000")
	merged, err := os.ReadFile(filepath.Join(r.workDir(), "merged.csv"))
	require.NoError(t, err)
	assert.Len(t, strings.Split(strings.TrimSpace(string(merged)), "\n"), 12, "one line per key")
	assert.NoFileExists(t, filepath.Join(r.workDir(), "input.csv"), "report removes the bulky input")
}

func TestExamplePipelineTransformRetryIsIdempotent(t *testing.T) {
	t.Parallel()
	requireTools(t)
	r := newExampleRun(t, loadExamples(t)["pipeline"], "retry")
	code, out := r.run(t, "generate", 1)
	require.Equal(t, 0, code, out)
	shard := filepath.Join(r.workDir(), "shard-1.csv")
	code, out = r.run(t, "transform-1", 1)
	require.Equal(t, 0, code, out)
	first, err := os.ReadFile(shard)
	require.NoError(t, err)
	code, out = r.run(t, "transform-1", 2)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "transform-1 (try 2)")
	second, err := os.ReadFile(shard)
	require.NoError(t, err)
	assert.Equal(t, first, second)
}

// TestExamplePipelineVerifyCatchesCorruption proves that verify checks
// what it claims to: each corruption must make it exit 1 with its reason.
func TestExamplePipelineVerifyCatchesCorruption(t *testing.T) {
	t.Parallel()
	requireTools(t)
	rewrite := func(t *testing.T, path string, edit func(string) string) {
		t.Helper()
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		changed := edit(string(b))
		require.NotEqual(t, string(b), changed)
		require.NoError(t, os.WriteFile(path, []byte(changed), 0o644))
	}
	// reseal rewrites name's .sha256 file to match its new content, so that
	// only a recomputation can catch the change.
	reseal := func(t *testing.T, dir, name string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		line := fmt.Sprintf("%x  %s\n", sha256.Sum256(b), name)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".sha256"), []byte(line), 0o644))
	}
	tests := []struct {
		name    string
		corrupt func(t *testing.T, dir string)
		want    string
	}{
		{"input changed after the manifest", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "input.csv"), func(s string) string { return strings.Replace(s, "\n1,", "\n1,x", 1) })
		}, "verify: FAILED: input.csv does not match the sha256 in its manifest"},
		{"shard changed without its checksum", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "shard-2.csv"), func(s string) string { return "x" + s })
		}, "verify: FAILED: shard-2.csv does not match its checksum"},
		{"merged.csv changed and resealed", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "merged.csv"), func(s string) string {
				key, rest, _ := strings.Cut(s, ",")
				return key + ",1" + rest // a count off by a lot
			})
			reseal(t, dir, "merged.csv")
		}, "verify: FAILED: merged.csv differs from a direct aggregation of input.csv"},
		{"manifest total wrong", func(t *testing.T, dir string) {
			rewrite(t, filepath.Join(dir, "manifest"), func(s string) string { return strings.Replace(s, "total ", "total 1", 1) })
		}, "verify: FAILED: merged.csv sums to "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newExampleRun(t, loadExamples(t)["pipeline"], "tampered")
			for _, id := range []string{"generate", "transform-0", "transform-1", "transform-2", "transform-3", "merge"} {
				code, out := r.run(t, id, 1)
				require.Equal(t, 0, code, "%s:\n%s", id, out)
			}
			tt.corrupt(t, r.workDir())
			code, out := r.run(t, "verify", 1)
			assert.Equal(t, 1, code, out)
			assert.Contains(t, out, tt.want)
		})
	}
}

func TestExampleFlakyFailsOnceThenSucceeds(t *testing.T) {
	t.Parallel()
	requireTools(t)
	s := loadExamples(t)["flaky"]
	require.Equal(t, []string{"fail-once", "after-retry"}, s.TopoOrder())
	r := newExampleRun(t, s, "run-1")

	code, out := r.run(t, "fail-once", 1)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "failing on purpose")

	code, out = r.run(t, "fail-once", 2)
	require.Equal(t, 0, code, out)

	code, out = r.run(t, "after-retry", 1)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "fail-once succeeded on try 2")
}

// TestExampleLongTicks runs long's command cut down to 1 s instead of 120.
func TestExampleLongTicks(t *testing.T) {
	t.Parallel()
	requireTools(t)
	r := newExampleRun(t, loadExamples(t)["long"], "run-1")
	code, out := r.run(t, "tick", 1, "SECONDS_TO_RUN=1")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "tick: 1/1\ntick: done")
}

// TestRerunExampleFailsUntilCleared: the clear example (docs/rerun.md)
// fails transform on its first try and leaves the marker, so the try a
// clear starts succeeds and load finds the sum.
func TestRerunExampleFailsUntilCleared(t *testing.T) {
	t.Parallel()
	requireTools(t)
	r := newExampleRun(t, loadExamples(t)["rerun"], "1")
	code, out := r.run(t, "extract", 1)
	require.Equal(t, 0, code, out)
	code, out = r.run(t, "transform", 1)
	require.Equal(t, 1, code, out)
	assert.Contains(t, out, "transform: try 1: the source is broken; clear me to try again")
	code, out = r.run(t, "transform", 2)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "transform: try 2: sum 5050")
	code, out = r.run(t, "load", 1)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "load: sum 5050 loaded")
}

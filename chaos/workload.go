package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/api/client"
)

// wtask is one task of a workload DAG: lines log lines step apart.
type wtask struct {
	id        string
	deps      []string
	tags      []string
	lines     int
	step      time.Duration
	failFirst bool          // exits 1 on try 1 (retries)
	timeout   time.Duration // execution_timeout; the task outlives it
}

func (t wtask) duration() time.Duration { return time.Duration(t.lines) * t.step }

// wdag is one workload DAG.
type wdag struct {
	id    string
	tasks []wtask
}

// Every task may retry 3 times, 1 s apart, so that work failed with its
// agent mostly finishes; the timeout DAG's slow task fails for good.
const (
	taskRetries    = 3
	taskRetryDelay = time.Second
	claimOverhead  = time.Second // a tick plus a claim, per task
)

// workloadDAGs: fan-out/fan-in, a chain with a long task (live during
// faults), retries (failFirst) and an execution timeout.
var workloadDAGs = []wdag{
	{id: "fan", tasks: []wtask{
		{id: "start", lines: 3, step: 300 * time.Millisecond},
		{id: "b1", deps: []string{"start"}, tags: []string{"gpu"}, lines: 8, step: 500 * time.Millisecond},
		{id: "b2", deps: []string{"start"}, tags: []string{"ssd"}, lines: 6, step: 400 * time.Millisecond},
		{id: "b3", deps: []string{"start"}, lines: 10, step: 300 * time.Millisecond},
		{id: "b4", deps: []string{"start"}, lines: 4, step: 300 * time.Millisecond, failFirst: true},
		{id: "join", deps: []string{"b1", "b2", "b3", "b4"}, lines: 2, step: 200 * time.Millisecond},
	}},
	{id: "chain", tasks: []wtask{
		{id: "c1", lines: 16, step: 500 * time.Millisecond},
		{id: "c2", deps: []string{"c1"}, tags: []string{"gpu"}, lines: 5, step: 400 * time.Millisecond, failFirst: true},
		{id: "c3", deps: []string{"c2"}, tags: []string{"ssd"}, lines: 4, step: 300 * time.Millisecond},
	}},
	{id: "timeout", tasks: []wtask{
		{id: "slow", lines: 10, step: 500 * time.Millisecond, timeout: 2 * time.Second},
		{id: "quick", lines: 3, step: 200 * time.Millisecond},
	}},
}

// spec renders d as DAG YAML running script with journal.
func (d wdag) spec(script, journal string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dag_id: chaos-%s\ntasks:\n", d.id)
	for _, t := range d.tasks {
		fmt.Fprintf(&b, "  - id: %s\n    retries: %d\n    retry_delay: %s\n", t.id, taskRetries, taskRetryDelay)
		if len(t.deps) > 0 {
			fmt.Fprintf(&b, "    depends_on: [%s]\n", strings.Join(t.deps, ", "))
		}
		if len(t.tags) > 0 {
			fmt.Fprintf(&b, "    tags: [%s]\n", strings.Join(t.tags, ", "))
		}
		if t.timeout > 0 {
			fmt.Fprintf(&b, "    execution_timeout: %s\n", t.timeout)
		}
		ff := 0
		if t.failFirst {
			ff = 1
		}
		fmt.Fprintf(&b, "    command: [\"sh\", %q, %q, \"%d\", \"%d\", \"%d\"]\n", script, journal, t.lines, t.step.Milliseconds(), ff)
	}
	return b.String()
}

// bound is d's worst fault-free run time: along its longest path, each
// task's run time plus the claim overhead, twice over (with the retry
// delay) for a task that fails its first try, and every try of a task
// that times out.
func (d wdag) bound() time.Duration {
	memo := map[string]time.Duration{}
	byID := map[string]wtask{}
	for _, t := range d.tasks {
		byID[t.id] = t
	}
	var finish func(id string) time.Duration
	finish = func(id string) time.Duration {
		if v, ok := memo[id]; ok {
			return v
		}
		t := byID[id]
		var start time.Duration
		for _, dep := range t.deps {
			start = max(start, finish(dep))
		}
		one := t.duration() + claimOverhead
		cost := one
		switch {
		case t.timeout > 0:
			cost = (taskRetries + 1) * (t.timeout + claimOverhead + taskRetryDelay)
		case t.failFirst:
			cost = 2*one + taskRetryDelay
		}
		memo[id] = start + cost
		return memo[id]
	}
	var b time.Duration
	for _, t := range d.tasks {
		b = max(b, finish(t.id))
	}
	return b
}

// workloadTimeouts maps each workload task with an execution_timeout to
// it (task ids are unique across the workload DAGs).
func workloadTimeouts() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, d := range workloadDAGs {
		for _, t := range d.tasks {
			if t.timeout > 0 {
				out[t.id] = t.timeout
			}
		}
	}
	return out
}

// applyWorkload applies the workload DAGs through any replica.
func (c *cluster) applyWorkload(ctx context.Context, script, journal string) (map[string]time.Duration, error) {
	bounds := map[string]time.Duration{}
	for _, d := range workloadDAGs {
		if err := c.operator(ctx, func(cl *client.Client) error {
			_, err := cl.ApplyDAG(ctx, d.spec(script, journal))
			return err
		}); err != nil {
			return nil, fmt.Errorf("apply DAG %s: %w", d.id, err)
		}
		bounds["chaos-"+d.id] = d.bound()
	}
	return bounds, nil
}

// operator runs fn against each replica in turn until one answers.
func (c *cluster) operator(ctx context.Context, fn func(*client.Client) error) error {
	var last error
	for _, r := range c.replicas {
		cl, err := client.New(r.url, operatorToken, &http.Client{Timeout: 3 * time.Second})
		if err != nil {
			return err
		}
		if last = fn(cl); last == nil || ctx.Err() != nil {
			return last
		}
	}
	return last
}

// trigger keeps up to live runs queued or running until ctx ends, picking
// DAGs from r.
func (c *cluster) trigger(ctx context.Context, r *rand.Rand, live int) {
	db := c.pgCfg
	t := time.NewTicker(400 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := liveRuns(ctx, fmt.Sprintf("postgres://vigil@127.0.0.1:%d/vigil?sslmode=disable", db.Port))
		if err != nil || n >= live {
			continue
		}
		d := workloadDAGs[r.IntN(len(workloadDAGs))]
		_ = c.operator(ctx, func(cl *client.Client) error {
			_, err := cl.TriggerRun(ctx, "chaos-"+d.id)
			return err
		})
	}
}

func liveRuns(ctx context.Context, url string) (int, error) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(qctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	var n int
	err = conn.QueryRow(qctx, `SELECT count(*) FROM runs WHERE state IN ('queued', 'running')`).Scan(&n)
	return n, err
}

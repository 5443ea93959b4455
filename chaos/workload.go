package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
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

// wdag is one workload DAG; every > 0 makes it scheduled ("@every
// every" from start, catchup on).
type wdag struct {
	id    string
	tasks []wtask
	every time.Duration
	start time.Time
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

// scheduledDAG runs on its own, a slot every few seconds through every
// fault, with catchup on so that no slot a failover delays is skipped:
// invariant 9 judges its runs, the others its executions. Its cap of
// active runs is far above what a short outage piles up, so catch-up is
// never held back by it.
var scheduledDAG = wdag{id: "tick", every: 3 * time.Second, tasks: []wtask{
	{id: "tick", lines: 2, step: 200 * time.Millisecond},
}}

// scheduleMaxActive is scheduledDAG's max_active_runs.
const scheduleMaxActive = 32

// spec renders d as DAG YAML running script with journal.
func (d wdag) spec(script, journal string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dag_id: chaos-%s\n", d.id)
	if d.every > 0 {
		fmt.Fprintf(&b, "schedule: \"@every %s\"\nstart_date: %s\ncatchup: true\nmax_active_runs: %d\n",
			d.every, d.start.UTC().Format(time.RFC3339), scheduleMaxActive)
	}
	b.WriteString("tasks:\n")
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

// applyWorkload applies the workload DAGs through any replica, the
// scheduled one with its first slot two seconds from now, and records
// their bounds and the schedule in h.
func (c *cluster) applyWorkload(ctx context.Context, script, journal string, h *History) error {
	h.RunBound = map[string]time.Duration{}
	sched := scheduledDAG
	sched.start = time.Now().UTC().Truncate(time.Second).Add(2 * time.Second)
	h.Schedule = ScheduleRecord{DAG: "chaos-" + sched.id, Start: sched.start, Every: sched.every}
	for _, d := range append(slices.Clone(workloadDAGs), sched) {
		if err := c.operator(ctx, func(cl *client.Client) error {
			_, err := cl.ApplyDAG(ctx, d.spec(script, journal))
			return err
		}); err != nil {
			return fmt.Errorf("apply DAG %s: %w", d.id, err)
		}
		h.RunBound["chaos-"+d.id] = d.bound()
	}
	return nil
}

// slotWait bounds how long closeSchedule waits for the schedule to catch
// up after the fault phase: a leader within the fence bound, then a tick,
// with room for runs held at the cap to finish.
const slotWait = 60 * time.Second

// closeSchedule records the end of the fault phase as the schedule's
// DueBy, waits until every slot due by then has its run (at most
// slotWait: invariant 9 reports what is missing), then pauses the
// scheduled DAG so the runs stop and the cluster can settle, and records
// when.
func (c *cluster) closeSchedule(ctx context.Context, h *History) {
	s := &h.Schedule
	s.DueBy = time.Now()
	due := int(s.DueBy.Sub(s.Start) / s.Every) // slots 0 .. due-1 are due
	deadline := s.DueBy.Add(slotWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if n, err := scheduledRuns(ctx, c.directURL(), s.DAG, s.slot(due)); err == nil && n >= due {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for time.Now().Before(deadline.Add(slotWait)) && ctx.Err() == nil {
		if c.operator(ctx, func(cl *client.Client) error {
			_, err := cl.SetPaused(ctx, s.DAG, true)
			return err
		}) == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	s.Paused = time.Now()
}

// scheduledRuns counts the slots before before that have a scheduled run
// of dagID.
func scheduledRuns(ctx context.Context, url, dagID string, before time.Time) (int, error) {
	var n int
	err := queryRow(ctx, url, func(conn *pgx.Conn, qctx context.Context) error {
		return conn.QueryRow(qctx, `SELECT count(DISTINCT logical_date) FROM runs
			WHERE dag_id = $1 AND run_type = 'scheduled' AND logical_date < $2`, dagID, before).Scan(&n)
	})
	return n, err
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
	t := time.NewTicker(400 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := liveRuns(ctx, c.directURL(), "manual")
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

// liveRuns counts the queued and running runs of runType (all runs when
// empty): the trigger keeps its manual runs to a number, whatever the
// schedule adds.
func liveRuns(ctx context.Context, url, runType string) (int, error) {
	var n int
	err := queryRow(ctx, url, func(conn *pgx.Conn, qctx context.Context) error {
		return conn.QueryRow(qctx, `SELECT count(*) FROM runs
			WHERE state IN ('queued', 'running') AND ($1 = '' OR run_type = $1)`, runType).Scan(&n)
	})
	return n, err
}

// queryRow runs one query on a new connection to url, within 2 s.
func queryRow(ctx context.Context, url string, q func(conn *pgx.Conn, qctx context.Context) error) error {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(qctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return q(conn, qctx)
}

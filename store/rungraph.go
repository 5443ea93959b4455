package store

import (
	"context"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/trigger"
)

// tiNode is one TI of a run as a clear, a mark or a late success plans
// its changes: its row and its edges.
type tiNode struct {
	id        int64
	taskID    string
	state     state.TI
	reason    state.Reason
	rule      trigger.Rule // its trigger_rule
	upstream  []string
	tryNumber int
	attemptID *string
	agentID   *int64
}

// runGraph is every TI of one run, read once; the planning over it is
// pure (tested without a database in rungraph_internal_test.go).
type runGraph struct {
	order    []string // task ids in declaration order
	nodes    map[string]*tiNode
	children map[string][]string
}

// loadRunGraphTx reads every TI of run runID. The caller holds the run
// row lock, which every write that moves a TI out of a terminal state or
// out of none takes first (the scheduler's pass, a late success, a clear,
// a mark): the terminal and none states it reads stay put until commit.
func loadRunGraphTx(ctx context.Context, tx pgx.Tx, runID int64) (runGraph, error) {
	rows, err := tx.Query(ctx, `
		SELECT id, task_id, state, coalesce(reason, ''), trigger_rule, upstream, try_number, attempt_id::text, agent_id
		  FROM task_instances WHERE run_id = $1 ORDER BY ordinal`, runID)
	if err != nil {
		return runGraph{}, err
	}
	var nodes []*tiNode
	for rows.Next() {
		var n tiNode
		if err := rows.Scan(&n.id, &n.taskID, &n.state, &n.reason, &n.rule, &n.upstream, &n.tryNumber, &n.attemptID, &n.agentID); err != nil {
			rows.Close()
			return runGraph{}, err
		}
		nodes = append(nodes, &n)
	}
	if err := rows.Err(); err != nil {
		return runGraph{}, err
	}
	return newRunGraph(nodes), nil
}

// newRunGraph indexes nodes, given in declaration order.
func newRunGraph(nodes []*tiNode) runGraph {
	g := runGraph{nodes: map[string]*tiNode{}, children: map[string][]string{}}
	for _, n := range nodes {
		g.order = append(g.order, n.taskID)
		g.nodes[n.taskID] = n
		for _, up := range n.upstream {
			g.children[up] = append(g.children[up], n.taskID)
		}
	}
	return g
}

// closure returns from and every task reachable from it through next
// (g.children: downstream; the upstream lists: upstream).
func (g runGraph) closure(from map[string]bool, next func(string) []string) map[string]bool {
	out := map[string]bool{}
	queue := make([]string, 0, len(from))
	for id := range from {
		out[id] = true
		queue = append(queue, id)
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, c := range next(id) {
			if !out[c] {
				out[c] = true
				queue = append(queue, c)
			}
		}
	}
	return out
}

func (g runGraph) downstream(id string) []string { return g.children[id] }

func (g runGraph) upstreamOf(id string) []string {
	if n := g.nodes[id]; n != nil {
		return n.upstream
	}
	return nil
}

// ruleEnded reports whether the scheduler ended n by its trigger rule
// (docs/trigger-rules.md): upstream_failed, or skipped with reason
// trigger_rule. Only such a TI is re-derived when an upstream's end
// changes; one that ran, or skipped itself by its exit code, stays.
func (n *tiNode) ruleEnded() bool {
	return ruleEndedState(n.state) && (n.state == state.TIUpstreamFailed || n.reason == state.ReasonTriggerRule)
}

// ruleEndedState reports whether the scheduler's trigger rules end a TI
// in s: upstream_failed or skipped (trigger.Decision.State).
func ruleEndedState(s state.TI) bool { return s == state.TIUpstreamFailed || s == state.TISkipped }

// reopenable returns the TIs to return to none because roots now end in
// to (none for a clear, success for a late success or a mark, failed for
// a mark): roots' transitive dependents through ruleEnded TIs, minus, to
// a fixed point, those whose trigger rule (trigger.Decide) still ends
// them as they are, with roots counted in to and the rest of the set as
// not done. The scheduler's pass then decides each again by the same
// function.
func (g runGraph) reopenable(roots map[string]bool, to state.TI) map[string]bool {
	reopen := map[string]bool{}
	queue := make([]string, 0, len(roots))
	for id := range roots {
		queue = append(queue, id)
	}
	for len(queue) > 0 {
		up := queue[0]
		queue = queue[1:]
		for _, c := range g.children[up] {
			if n := g.nodes[c]; n != nil && n.ruleEnded() && !reopen[c] && !roots[c] {
				reopen[c] = true
				queue = append(queue, c)
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, c := range g.order { // in declaration order: the same set every time
			if !reopen[c] {
				continue
			}
			n := g.nodes[c]
			var counts trigger.Counts
			for _, up := range n.upstream {
				switch u := g.nodes[up]; {
				case roots[up]:
					counts.Add(to)
				case reopen[up] || u == nil:
					counts.Add(state.TINone)
				default:
					counts.Add(u.state)
				}
			}
			if trigger.Decide(n.rule, counts).State() == n.state {
				delete(reopen, c)
				changed = true
			}
		}
	}
	return reopen
}

// inOrder returns the tasks of set in declaration order.
func (g runGraph) inOrder(set map[string]bool) []string {
	var out []string
	for _, id := range g.order {
		if set[id] {
			out = append(out, id)
		}
	}
	return out
}

// ids returns the TI ids of tasks.
func (g runGraph) ids(tasks []string) []int64 {
	out := make([]int64, 0, len(tasks))
	for _, id := range tasks {
		out = append(out, g.nodes[id].id)
	}
	return out
}

// unknown returns the task ids of tasks that are no task of the run.
func (g runGraph) unknown(tasks []string) []string {
	var out []string
	for _, id := range tasks {
		if g.nodes[id] == nil && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

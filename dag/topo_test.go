package dag

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTopoOrder(t *testing.T) {
	t.Parallel()
	task := func(id string, deps ...string) Task {
		return Task{ID: id, DependsOn: deps, Command: []string{"true"}}
	}
	tests := []struct {
		name  string
		tasks []Task
		want  []string
	}{
		{"empty", nil, []string{}},
		{"one", []Task{task("a")}, []string{"a"}},
		{"independent tasks keep declaration order", []Task{task("c"), task("a"), task("b")}, []string{"c", "a", "b"}},
		{"chain declared backwards", []Task{task("c", "b"), task("b", "a"), task("a")}, []string{"a", "b", "c"}},
		{"diamond", []Task{task("d", "b", "c"), task("c", "a"), task("b", "a"), task("a")}, []string{"a", "c", "b", "d"}},
		{"ties go to the earliest declared ready task",
			// x becomes ready after z, but is declared first, so it goes
			// before y as soon as it is ready.
			[]Task{task("x", "z"), task("y"), task("z")},
			[]string{"y", "z", "x"}},
		{"fan-out and fan-in",
			[]Task{task("gen"), task("t0", "gen"), task("t1", "gen"), task("t2", "gen"), task("merge", "t0", "t1", "t2"), task("report", "merge")},
			[]string{"gen", "t0", "t1", "t2", "merge", "report"}},
		// Invalid specs: still every task once, no panic.
		{"unknown and repeated dependencies are ignored", []Task{task("b", "zz", "a", "a"), task("a")}, []string{"a", "b"}},
		{"a cycle goes last in declaration order", []Task{task("p", "q"), task("q", "p"), task("r"), task("s", "p")}, []string{"r", "p", "q", "s"}},
		{"self-dependency is ignored", []Task{task("a", "a")}, []string{"a"}},
		{"duplicate ids", []Task{task("a"), task("b", "a"), task("a", "b")}, []string{"a", "b", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := &Spec{DAGID: "topo", Tasks: tt.tasks}
			assert.Equal(t, tt.want, s.TopoOrder())
		})
	}
}

// TestTopoOrderRespectsDependencies checks the defining property on a
// larger generated DAG: every task comes after all it depends on.
func TestTopoOrderRespectsDependencies(t *testing.T) {
	t.Parallel()
	s := &Spec{DAGID: "big"}
	const n = 2000
	for i := range n {
		var deps []string
		// Depend on a few later-declared tasks, so that declaration
		// order alone is not a valid order.
		for _, d := range []int{i*7 + 1, i*13 + 5, i + 1} {
			if d < n && d > i && !slices.Contains(deps, fmt.Sprint("t", d)) {
				deps = append(deps, fmt.Sprint("t", d))
			}
		}
		s.Tasks = append(s.Tasks, Task{ID: fmt.Sprint("t", i), DependsOn: deps, Command: []string{"true"}})
	}
	require.NoError(t, s.Validate())
	order := s.TopoOrder()
	require.Len(t, order, n)
	pos := make(map[string]int, n)
	for i, id := range order {
		pos[id] = i
	}
	require.Len(t, pos, n, "every task exactly once")
	for _, task := range s.Tasks {
		for _, d := range task.DependsOn {
			assert.Less(t, pos[d], pos[task.ID], "%s depends on %s", task.ID, d)
		}
	}
	assert.Equal(t, order, s.TopoOrder(), "stable across calls")
}

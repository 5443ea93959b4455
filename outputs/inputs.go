package outputs

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// InputPrefix begins the name of each variable that carries an upstream's
// output to a task.
const InputPrefix = "VIGIL_INPUT_"

// InputName is the variable that carries output key of the upstream task
// taskID: VIGIL_INPUT_<TASK_ID>_<KEY>, both upper-cased, every byte but an
// ASCII letter or digit written '_' (task load-db, key row_count:
// VIGIL_INPUT_LOAD_DB_ROW_COUNT).
func InputName(taskID, key string) string {
	var b strings.Builder
	b.Grow(len(InputPrefix) + len(taskID) + 1 + len(key))
	b.WriteString(InputPrefix)
	envWord(&b, taskID)
	b.WriteByte('_')
	envWord(&b, key)
	return b.String()
}

func envWord(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
}

// InputEnv maps the outputs of a task instance's direct upstreams (task id
// → key → value) to its VIGIL_INPUT_* variables (InputName → value).
//
// Two outputs whose names are the same variable (task a's key b_c and
// task a_b's key c are both VIGIL_INPUT_A_B_C) are an error naming both:
// neither is delivered in place of the other, since a task cannot tell
// which it got. So are inputs over MaxInputBytes. The error is the reason
// the downstream's try cannot start (docs/task-environment.md, "Outputs").
func InputEnv(up map[string]map[string]string) (map[string]string, error) {
	if len(up) == 0 {
		return nil, nil
	}
	env := map[string]string{}
	from := map[string]string{} // variable → "output K of task T", for a collision
	size := 0
	for _, task := range slices.Sorted(maps.Keys(up)) {
		for _, key := range slices.Sorted(maps.Keys(up[task])) {
			name, v := InputName(task, key), up[task][key]
			here := fmt.Sprintf("output %s of task %s", key, task)
			if first, dup := from[name]; dup {
				return nil, fmt.Errorf("inputs: %s would carry both %s and %s; rename one of the keys", name, first, here)
			}
			from[name], env[name] = here, v
			size += len(name) + len(v)
		}
	}
	if size > MaxInputBytes {
		return nil, fmt.Errorf("inputs: the outputs of this task's upstreams make %d bytes of VIGIL_INPUT_* variables, over the limit of %d bytes; pass large data through files or object storage",
			size, MaxInputBytes)
	}
	return env, nil
}

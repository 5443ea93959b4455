package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/internal/proctest"
	"github.com/vigil-sched/vigil/state"
)

// parentOf is pid's parent pid, from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err)
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ppid, err := strconv.Atoi(f[1])
	require.NoError(t, err)
	return ppid
}

// TestSupervisorKilledTaskGroupDies SIGKILLs the agent's task supervisor
// while a task runs with a child that ignores SIGTERM: the agent reports
// the attempt failed by the supervisor's signal, with the task's own
// status unknown, only after it has killed the task's whole group
// (SIGTERM, SIGKILL after the grace, so a retry never runs beside it):
// the group's processes are gone as soon as the kernel delivers the
// SIGKILL. The next task runs under a new supervisor.
func TestSupervisorKilledTaskGroupDies(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, func(c *Config) { c.KillGrace = 300 * time.Millisecond })
	dir := t.TempDir()
	task := f.enqueue(0, map[string]string{"DIR": dir}, sh(`(trap "" TERM; exec sleep 300) & echo $! > "$DIR/child.tmp" && mv "$DIR/child.tmp" "$DIR/child"
echo $$ > "$DIR/leader.tmp" && mv "$DIR/leader.tmp" "$DIR/leader"; wait`)...)
	leader := proctest.PidFromFile(t, filepath.Join(dir, "leader"))
	child := proctest.PidFromFile(t, filepath.Join(dir, "child"))
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL); _ = syscall.Kill(leader, syscall.SIGKILL) })
	sup := parentOf(t, leader)
	require.NoError(t, syscall.Kill(sup, syscall.SIGKILL))

	c := f.waitCompletion(task.AttemptID, 10*time.Second)
	assert.Eventually(t, func() bool { return proctest.Gone(leader) && proctest.Gone(child) }, 5*time.Second, 10*time.Millisecond,
		"the task's group (leader %d, child %d) was killed before the attempt was reported", leader, child)
	assert.Equal(t, state.OutcomeFailed, c.Outcome)
	assert.Equal(t, state.FailureSignal, c.Failure)
	assert.Equal(t, "SIGKILL", c.Signal)
	assert.Equal(t, "task supervisor killed by signal SIGKILL; the task's own status is unknown", c.Error)
	lines := f.lines(task.AttemptID)
	if assert.NotEmpty(t, lines) {
		assert.Contains(t, lines[len(lines)-1].Line, "--- the task's supervisor is gone (task supervisor exited (pid ")
	}

	next := f.enqueue(0, map[string]string{"DIR": dir}, sh(`echo $PPID > "$DIR/next.tmp" && mv "$DIR/next.tmp" "$DIR/next"`)...)
	c = f.waitCompletion(next.AttemptID, 10*time.Second)
	assert.Equal(t, state.OutcomeSuccess, c.Outcome, "the next task runs under a new supervisor: %+v", c)
	assert.NotEqual(t, sup, proctest.PidFromFile(t, filepath.Join(dir, "next")))
}

package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSupervisorKillsTaskTreeWhenAgentDies stands a shell in for the
// agent: it starts the supervisor (this test binary, see TestMain) with
// --parent-pid of its own pid, and the task starts two grandchildren, one
// of which ignores SIGTERM. SIGKILL of the stand-in agent must take the
// whole tree down within kill-grace + 1 s: the SIGTERM-ignoring one by the
// SIGKILL that follows the grace. Before the supervisor, tasks ran with
// Setpgid only and all three lived on.
func TestSupervisorKillsTaskTreeWhenAgentDies(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	const grace = 500 * time.Millisecond
	task := `echo $$ > "$DIR/leader.tmp" && mv "$DIR/leader.tmp" "$DIR/leader"
(trap "" TERM; exec sleep 300) & echo $! > "$DIR/stubborn.tmp" && mv "$DIR/stubborn.tmp" "$DIR/stubborn"
sleep 300 & echo $! > "$DIR/plain.tmp" && mv "$DIR/plain.tmp" "$DIR/plain"
wait`
	agent := exec.Command("sh", "-c", `"$0" `+SupervisorCommand+` --parent-pid $$ --kill-grace "$1" -- sh -c "$2" & wait`,
		self, grace.String(), task)
	agent.Env = append(os.Environ(), "DIR="+dir)
	agent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // kill -9 reaches the stand-in only
	require.NoError(t, agent.Start())
	t.Cleanup(func() { _ = syscall.Kill(agent.Process.Pid, syscall.SIGKILL); _ = agent.Wait() })

	var pids []int
	for _, name := range []string{"leader", "stubborn", "plain"} {
		pid := pidFromFile(t, filepath.Join(dir, name))
		pids = append(pids, pid)
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	for _, pid := range pids {
		require.False(t, processGone(pid), "pid %d runs before the agent dies", pid)
	}
	require.NoError(t, syscall.Kill(agent.Process.Pid, syscall.SIGKILL))
	killed := time.Now()
	_ = agent.Wait()
	deadline := killed.Add(grace + time.Second)
	for _, pid := range pids {
		for !processGone(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		assert.True(t, processGone(pid), "task process %d still alive %s after its agent died (kill-grace %s)",
			pid, time.Since(killed).Round(time.Millisecond), grace)
	}
	t.Logf("task tree %v gone %s after kill -9 of its agent (kill-grace %s)", pids, time.Since(killed).Round(time.Millisecond), grace)
}

// TestSupervisorRejectsBadArguments checks each rule is named.
func TestSupervisorRejectsBadArguments(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	require.NoError(t, err)
	pid := strconv.Itoa(os.Getpid())
	for want, args := range map[string][]string{
		"--parent-pid: must be a pid greater than 0": {"--kill-grace", "1s", "--", "true"},
		"--kill-grace: must not be negative":         {"--parent-pid", pid, "--kill-grace", "-1s", "--", "true"},
		"no command after --":                        {"--parent-pid", pid, "--"},
	} {
		out, err := exec.Command(self, append([]string{SupervisorCommand}, args...)...).CombinedOutput()
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, "%v: %s", args, out)
		assert.Equal(t, supervisorFailed, ee.ExitCode(), "%v", args)
		assert.Contains(t, string(out), want, "%v", args)
	}
}

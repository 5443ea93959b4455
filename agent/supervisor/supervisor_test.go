package supervisor

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/internal/proctest"
)

// smallBin is cmd/vigil-supervise, built by TestMain.
var smallBin string

// TestMain builds cmd/vigil-supervise, and lets the test binary serve as
// the other form of the supervisor: started as `<test binary>
// __supervise ...` it runs Run, as `vigil __supervise` does, instead of
// the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Subcommand {
		os.Exit(Run(os.Args[2:]))
	}
	dir, err := os.MkdirTemp("", "vigil-supervise-test-*")
	if err == nil {
		err = proctest.Build(dir, "./cmd/"+ProgramName)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "supervisor tests:", err)
		os.Exit(1)
	}
	smallBin = filepath.Join(dir, ProgramName)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// form is one way the agent starts the supervisor: a program and the
// arguments before Args.
type form struct {
	name string
	path string
	lead []string
}

// forms are both: the small binary, and a binary dispatching Subcommand
// (this test binary standing in for vigil).
func forms(t *testing.T) []form {
	self, err := os.Executable()
	require.NoError(t, err)
	return []form{
		{ProgramName, smallBin, nil},
		{Subcommand, self, []string{Subcommand}},
	}
}

// TestSupervisorKillsTaskTreeWhenAgentDies stands a shell in for the
// agent: it starts the supervisor with --parent-pid of its own pid, and
// the task starts two grandchildren, one of which ignores SIGTERM.
// SIGKILL of the stand-in agent must take the whole tree down within
// kill-grace + 1 s: the SIGTERM-ignoring one by the SIGKILL that follows
// the grace. Without a supervisor, tasks ran with Setpgid only and all
// three lived on.
func TestSupervisorKillsTaskTreeWhenAgentDies(t *testing.T) {
	t.Parallel()
	for _, f := range forms(t) {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			killTreeWithAgent(t, f, nil)
		})
	}
}

// nobody is the identity of the OS user nobody (65534:65534) with a
// fresh working directory it owns; the test needs root, as the agent does
// to switch users.
func nobody(t *testing.T) *Identity {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("switching to another user needs root: run the tests as root, as make test and CI do (README)")
	}
	dir, err := os.MkdirTemp("", "vigil-supervise-as-*") // t.TempDir's parent is root's 0700
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chown(dir, 65534, 65534))
	return &Identity{UID: 65534, GID: 65534, Groups: []int{65534}, Dir: dir}
}

// TestSupervisorKillsAnotherUsersTaskTreeWhenAgentDies is the guarantee
// above for a task that runs as another user: the supervisor, still the
// agent's user, kills a tree it does not own.
func TestSupervisorKillsAnotherUsersTaskTreeWhenAgentDies(t *testing.T) {
	t.Parallel()
	for _, f := range forms(t) {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			as := nobody(t)
			killTreeWithAgent(t, f, as)
		})
	}
}

// TestSupervisorRunsTaskAsIdentity checks the switch itself: the task's
// real and effective ids, its groups, its working directory, and that it
// may write there and not where only root may, with its exact wait status
// reported as before.
func TestSupervisorRunsTaskAsIdentity(t *testing.T) {
	t.Parallel()
	for _, f := range forms(t) {
		as := nobody(t)
		out := filepath.Join(as.Dir, "out")
		script := `echo "$(id -ru) $(id -u) $(id -rg) $(id -g) $(id -G) $(pwd)" > out; ` +
			`if echo x > "$ROOTONLY" 2>/dev/null; then echo wrote; fi >> out; exit 7`
		rootOnly := filepath.Join(t.TempDir(), "root-only")
		lines, exit := superviseAs(t, f, as, []string{"ROOTONLY=" + rootOnly}, "sh", "-c", script)
		require.Len(t, lines, 2, "%s: %v", f.name, lines)
		assert.Equal(t, Status{Kind: KindExited, N: 7, Text: "7"}, lines[1], f.name)
		assert.Equal(t, 7, exit, f.name)
		got, err := os.ReadFile(out)
		require.NoError(t, err, f.name)
		assert.Equal(t, "65534 65534 65534 65534 65534 "+as.Dir+"\n", string(got), f.name)
		assert.NoFileExists(t, rootOnly, "%s: the task wrote into a directory of root's", f.name)
	}
}

func killTreeWithAgent(t *testing.T, f form, as *Identity) {
	dir := t.TempDir()
	lead := f.lead
	if as != nil {
		dir = as.Dir // the task writes its pid files there
		lead = append(slices.Clip(f.lead), Args(1, 0, as, nil)[4:len(Args(1, 0, as, nil))-1]...)
	}
	const grace = 500 * time.Millisecond
	task := `echo $$ > "$DIR/leader.tmp" && mv "$DIR/leader.tmp" "$DIR/leader"
(trap "" TERM; exec sleep 300) & echo $! > "$DIR/stubborn.tmp" && mv "$DIR/stubborn.tmp" "$DIR/stubborn"
sleep 300 & echo $! > "$DIR/plain.tmp" && mv "$DIR/plain.tmp" "$DIR/plain"
wait`
	agent := exec.Command("sh", append([]string{"-c",
		`"$0" "$@" --parent-pid $$ --kill-grace "$GRACE" -- sh -c "$TASK" & wait`, f.path}, lead...)...)
	agent.Env = append(os.Environ(), "DIR="+dir, "GRACE="+grace.String(), "TASK="+task)
	agent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // kill -9 reaches the stand-in only
	require.NoError(t, agent.Start())
	t.Cleanup(func() { _ = syscall.Kill(agent.Process.Pid, syscall.SIGKILL); _ = agent.Wait() })

	var pids []int
	for _, name := range []string{"leader", "stubborn", "plain"} {
		pid := proctest.PidFromFile(t, filepath.Join(dir, name))
		pids = append(pids, pid)
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	for _, pid := range pids {
		require.False(t, proctest.Gone(pid), "pid %d runs before the agent dies", pid)
		if as != nil {
			fi, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
			require.NoError(t, err)
			require.Equal(t, uint32(as.UID), fi.Sys().(*syscall.Stat_t).Uid, "pid %d runs as the task's user", pid)
		}
	}
	require.NoError(t, syscall.Kill(agent.Process.Pid, syscall.SIGKILL))
	killed := time.Now()
	_ = agent.Wait()
	deadline := killed.Add(grace + time.Second)
	for _, pid := range pids {
		for !proctest.Gone(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		assert.True(t, proctest.Gone(pid), "task process %d still alive %s after its agent died (kill-grace %s)",
			pid, time.Since(killed).Round(time.Millisecond), grace)
	}
	t.Logf("task tree %v gone %s after kill -9 of its agent (kill-grace %s)", pids, time.Since(killed).Round(time.Millisecond), grace)
}

// TestSupervisorReportsExactWaitStatus starts each form as the agent
// does, with the status pipe as descriptor 3, and reads back what the
// task's leader did: its exit code, or the signal that killed it, and the
// supervisor's own exit code derived from it.
func TestSupervisorReportsExactWaitStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		script string
		want   Kind
		n      int
		exit   int
	}{
		{"exit 0", KindExited, 0, 0},
		{"exit 3", KindExited, 3, 3},
		{"kill -KILL $$", KindSignaled, int(syscall.SIGKILL), 128 + int(syscall.SIGKILL)},
	}
	for _, f := range forms(t) {
		for _, c := range cases {
			lines, exit := supervise(t, f, "sh", "-c", c.script)
			require.Len(t, lines, 2, "%s %q: %v", f.name, c.script, lines)
			assert.Equal(t, KindStarted, lines[0].Kind)
			assert.Positive(t, lines[0].N, "the leader's pid")
			assert.Equal(t, Status{Kind: c.want, N: c.n, Text: strconv.Itoa(c.n)}, lines[1], "%s %q", f.name, c.script)
			assert.Equal(t, c.exit, exit, "%s %q: the supervisor's exit code", f.name, c.script)
		}
		lines, exit := supervise(t, f, filepath.Join(t.TempDir(), "no-such-program"))
		require.Len(t, lines, 1, "%s: %v", f.name, lines)
		assert.Equal(t, KindStartFailed, lines[0].Kind)
		assert.Contains(t, lines[0].Text, "no such file or directory")
		assert.Equal(t, ExitNoExec, exit, f.name)
	}
}

// supervise runs command under f with this process as the agent and
// returns the status lines and the supervisor's exit code.
func supervise(t *testing.T, f form, command ...string) ([]Status, int) {
	t.Helper()
	return superviseAs(t, f, nil, nil, command...)
}

// superviseAs is supervise with an identity and extra environment.
func superviseAs(t *testing.T, f form, as *Identity, env []string, command ...string) ([]Status, int) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command(f.path, append(append([]string{}, f.lead...), Args(os.Getpid(), time.Second, as, command)...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.ExtraFiles = []*os.File{w}
	require.NoError(t, cmd.Start())
	_ = w.Close()
	var lines []Status
	for s := range ReadStatus(r) {
		lines = append(lines, s)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &ee)
		return lines, ee.ExitCode()
	}
	return lines, 0
}

// TestSupervisorRejectsBadArguments checks each rule is named, by both
// forms, on stderr and on the status pipe.
func TestSupervisorRejectsBadArguments(t *testing.T) {
	t.Parallel()
	pid := strconv.Itoa(os.Getpid())
	for _, f := range forms(t) {
		for want, args := range map[string][]string{
			"--parent-pid: must be a pid greater than 0":  {"--kill-grace", "1s", "--", "true"},
			"--kill-grace: must not be negative":          {"--parent-pid", pid, "--kill-grace", "-1s", "--", "true"},
			"no command after --":                         {"--parent-pid", pid, "--"},
			"invalid value \"soon\" for flag -kill-grace": {"--parent-pid", pid, "--kill-grace", "soon", "--", "true"},
			"--uid: must be a uid greater than 0":         {"--parent-pid", pid, "--uid", "0", "--gid", "0", "--dir", "/", "--", "true"},
			"--gid: required with --uid":                  {"--parent-pid", pid, "--uid", "65534", "--dir", "/", "--", "true"},
			"--dir: required with --uid":                  {"--parent-pid", pid, "--uid", "65534", "--gid", "65534", "--", "true"},
			"--groups: \"1,x\" must be a comma-separated": {"--parent-pid", pid, "--uid", "65534", "--gid", "65534", "--dir", "/", "--groups", "1,x", "--", "true"},
		} {
			out, err := exec.Command(f.path, append(append([]string{}, f.lead...), args...)...).CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s %v: %s", f.name, args, out)
			assert.Equal(t, ExitFailed, ee.ExitCode(), "%s %v", f.name, args)
			assert.Contains(t, string(out), want, "%s %v", f.name, args)
		}
	}
}

// TestArgsRoundTrip checks that what the agent builds is what the
// supervisor parses, a command that looks like flags included.
func TestArgsRoundTrip(t *testing.T) {
	t.Parallel()
	command := []string{"sh", "-c", "echo --parent-pid 1", "--kill-grace", "--uid", "0", "--"}
	o, err := parseArgs(Args(4242, 1500*time.Millisecond, nil, command))
	require.NoError(t, err)
	assert.Equal(t, options{parent: 4242, grace: 1500 * time.Millisecond, argv: command}, o)
	as := &Identity{UID: 1001, GID: 1002, Groups: []int{1002, 27}, Dir: "/tmp/w"}
	o, err = parseArgs(Args(4242, time.Second, as, command))
	require.NoError(t, err)
	assert.Equal(t, options{parent: 4242, grace: time.Second, as: as, argv: command}, o)
}

// TestReadStatusDropsUnparsableLines feeds ReadStatus what a supervisor
// writes, a line cut short and one of an unknown number among them.
func TestReadStatusDropsUnparsableLines(t *testing.T) {
	t.Parallel()
	in := "started 41\nstart_failed exec: \"x\": not found\nexited x\nsignaled 9\nleftover 41\nexit"
	var got []Status
	for s := range ReadStatus(io.NopCloser(strings.NewReader(in))) {
		got = append(got, s)
	}
	assert.Equal(t, []Status{
		{Kind: KindStarted, N: 41, Text: "41"},
		{Kind: KindStartFailed, Text: `exec: "x": not found`},
		{Kind: KindSignaled, N: 9, Text: "9"},
		{Kind: KindLeftover, N: 41, Text: "41"},
	}, got)
}

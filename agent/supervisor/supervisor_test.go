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
	"sync"
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
// the tests. Started as `<test binary> __standin_agent` it is an agent
// for the tests that kill one (standInAgent).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == Subcommand {
		os.Exit(Run(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == standInArg {
		os.Exit(standInAgent())
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

// startClient starts f's supervisor for this process, stopped at the
// end of the test.
func startClient(t *testing.T, f form, grace time.Duration) *Client {
	t.Helper()
	c, err := StartClient(f.path, f.lead, grace)
	require.NoError(t, err, f.name)
	t.Cleanup(c.Close)
	return c
}

// ran is what a task reported: its status lines and its output.
type ran struct {
	lines  []Status
	stdout string
}

// runTask starts argv on c as the agent does, with as (nil: none) and
// env overriding this process's environment, and reads its lines until its
// channel closes and its stdout to end of file.
func runTask(t *testing.T, c *Client, as *Identity, env []string, argv ...string) (ran, *Task) {
	t.Helper()
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer outR.Close()
	tk, err := c.Start(Request{Argv: argv, Env: overlay(os.Environ(), env), As: as, Stdout: outW, Stderr: outW})
	_ = outW.Close()
	require.NoError(t, err)
	var r ran
	out := make(chan string, 1)
	go func() { b, _ := io.ReadAll(outR); out <- string(b) }()
	for s := range tk.Status {
		r.lines = append(r.lines, s)
	}
	select {
	case r.stdout = <-out:
	case <-time.After(10 * time.Second):
		t.Errorf("stdout still open 10 s after the task's last line %v: a process of its group outlived it", r.lines)
	}
	return r, tk
}

// overlay is base without the variables env sets, then env.
func overlay(base, env []string) []string {
	name := func(kv string) string { n, _, _ := strings.Cut(kv, "="); return n }
	out := slices.Clone(env)
	for _, kv := range base {
		if !slices.ContainsFunc(env, func(e string) bool { return name(e) == name(kv) }) {
			out = append(out, kv)
		}
	}
	return out
}

// kinds are the kinds and numbers of lines, without their task ids.
func kinds(lines []Status) []string {
	var out []string
	for _, l := range lines {
		out = append(out, fmt.Sprintf("%s %d", l.Kind, l.N))
	}
	return out
}

// TestSupervisorReportsExactWaitStatus runs tasks on one supervisor of
// each form, at once, and reads back what each task's leader did: its
// exit code, or the signal that killed it; a program that cannot start
// is start_failed with exec's reason.
func TestSupervisorReportsExactWaitStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		argv []string
		want Kind
		n    int
	}{
		{[]string{"sh", "-c", "echo out; exit 0"}, KindExited, 0},
		{[]string{"sh", "-c", "exit 3"}, KindExited, 3},
		{[]string{"sh", "-c", "exit 255"}, KindExited, 255},
		{[]string{"sh", "-c", "kill -KILL $$"}, KindSignaled, int(syscall.SIGKILL)},
		{[]string{"sh", "-c", "kill -SEGV $$"}, KindSignaled, int(syscall.SIGSEGV)},
	}
	for _, f := range forms(t) {
		c := startClient(t, f, time.Second)
		var wg sync.WaitGroup
		for _, tc := range cases {
			wg.Go(func() {
				r, _ := runTask(t, c, nil, nil, tc.argv...)
				if assert.Len(t, r.lines, 2, "%s %q: %v", f.name, tc.argv, r.lines) {
					assert.Equal(t, KindStarted, r.lines[0].Kind)
					assert.Positive(t, r.lines[0].N, "the leader's pid")
					assert.Equal(t, r.lines[0].ID, r.lines[1].ID)
					assert.Equal(t, Status{ID: r.lines[0].ID, Kind: tc.want, N: tc.n}, r.lines[1], "%s %q", f.name, tc.argv)
				}
			})
		}
		wg.Wait()
		r, _ := runTask(t, c, nil, nil, "sh", "-c", "echo out")
		assert.Equal(t, "out\n", r.stdout, "%s: the task writes to the agent's pipe", f.name)
		r, _ = runTask(t, c, nil, nil, filepath.Join(t.TempDir(), "no-such-program"))
		require.Len(t, r.lines, 1, "%s: %v", f.name, r.lines)
		assert.Equal(t, KindStartFailed, r.lines[0].Kind)
		assert.Contains(t, r.lines[0].Text, "no such file or directory")
		r, _ = runTask(t, c, nil, []string{"PATH=/nonexistent"}, "sh", "-c", "exit 0")
		require.Len(t, r.lines, 1, "%s: %v", f.name, r.lines)
		assert.Equal(t, `exec: "sh": executable file not found in $PATH`, r.lines[0].Text, "the task's PATH is searched")
	}
}

// TestSupervisorKillsLeftoversBeforeTheLastLine: a leader that exits
// leaving a child in its group gets started, leftover, exited, in that
// order, and by the exited line the child is gone (the agent's drain
// relies on it: the child no longer holds the output pipe).
func TestSupervisorKillsLeftoversBeforeTheLastLine(t *testing.T) {
	t.Parallel()
	c := startClient(t, forms(t)[0], 5*time.Second)
	pidfile := filepath.Join(t.TempDir(), "child")
	r, _ := runTask(t, c, nil, []string{"PIDFILE=" + pidfile},
		"sh", "-c", `sleep 300 & echo $! > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE"; exit 4`)
	child := proctest.PidFromFile(t, pidfile)
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	require.Len(t, r.lines, 3, "%v", r.lines)
	pgid := r.lines[0].N
	assert.Equal(t, []string{fmt.Sprintf("started %d", pgid), fmt.Sprintf("leftover %d", pgid), "exited 4"}, kinds(r.lines))
	assert.True(t, proctest.Gone(child), "the leftover child %d is gone by the last line", child)
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

// TestSupervisorRunsTaskAsIdentity checks the switch itself: the task's
// real and effective ids, its groups, its working directory, and that it
// may write there and not where only root may, with its exact wait status
// reported as before.
func TestSupervisorRunsTaskAsIdentity(t *testing.T) {
	t.Parallel()
	for _, f := range forms(t) {
		c := startClient(t, f, time.Second)
		as := nobody(t)
		out := filepath.Join(as.Dir, "out")
		script := `echo "$(id -ru) $(id -u) $(id -rg) $(id -g) $(id -G) $(pwd)" > out; ` +
			`if echo x > "$ROOTONLY" 2>/dev/null; then echo wrote; fi >> out; exit 7`
		rootOnly := filepath.Join(t.TempDir(), "root-only")
		r, _ := runTask(t, c, as, []string{"ROOTONLY=" + rootOnly}, "sh", "-c", script)
		require.Len(t, r.lines, 2, "%s: %v", f.name, r.lines)
		assert.Equal(t, "exited 7", kinds(r.lines)[1], f.name)
		got, err := os.ReadFile(out)
		require.NoError(t, err, f.name)
		assert.Equal(t, "65534 65534 65534 65534 65534 "+as.Dir+"\n", string(got), f.name)
		assert.NoFileExists(t, rootOnly, "%s: the task wrote into a directory of root's", f.name)
	}
}

// standInArg makes the test binary standInAgent.
const standInArg = "__standin_agent"

// standInTask is each stand-in task: a leader with a child that ignores
// SIGTERM and a plain grandchild-holding child, their pids written to
// $DIR/$I-<name>.
const standInTask = `put() { echo "$2" > "$DIR/$I-$1.tmp" && mv "$DIR/$I-$1.tmp" "$DIR/$I-$1"; }
(trap "" TERM; exec sleep 300) & put stubborn $!
sh -c 'sleep 300 & echo $! > "$DIR/$I-grandchild.tmp" && mv "$DIR/$I-grandchild.tmp" "$DIR/$I-grandchild"; wait' & put child $!
put leader $$
wait`

// standInAgent is an agent for the tests: it starts the supervisor named
// by $SUPERVISOR ($LEAD its leading argument, $GRACE its kill grace),
// starts $TASKS copies of standInTask (as nobody when $AS_DIR is set,
// working there), writes the supervisor's pid to $DIR/supervisor, and
// blocks until it is killed.
func standInAgent() int {
	var lead []string
	if l := os.Getenv("LEAD"); l != "" {
		lead = []string{l}
	}
	grace, err := time.ParseDuration(os.Getenv("GRACE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "stand-in agent: GRACE:", err)
		return 1
	}
	c, err := StartClient(os.Getenv("SUPERVISOR"), lead, grace)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stand-in agent:", err)
		return 1
	}
	var as *Identity
	if d := os.Getenv("AS_DIR"); d != "" {
		as = &Identity{UID: 65534, GID: 65534, Groups: []int{65534}, Dir: d}
	}
	n, _ := strconv.Atoi(os.Getenv("TASKS"))
	for i := range n {
		tk, err := c.Start(Request{Argv: []string{"sh", "-c", standInTask}, Env: append(os.Environ(), "I="+strconv.Itoa(i)),
			As: as, Stdout: os.Stdout, Stderr: os.Stderr})
		if err != nil {
			fmt.Fprintln(os.Stderr, "stand-in agent:", err)
			return 1
		}
		if s := <-tk.Status; s.Kind != KindStarted {
			fmt.Fprintln(os.Stderr, "stand-in agent: task", i, s)
			return 1
		}
	}
	dir := os.Getenv("DIR")
	if err := os.WriteFile(filepath.Join(dir, "supervisor.tmp"), []byte(strconv.Itoa(c.Pid())+"\n"), 0o644); err != nil {
		return 1
	}
	if err := os.Rename(filepath.Join(dir, "supervisor.tmp"), filepath.Join(dir, "supervisor")); err != nil {
		return 1
	}
	select {}
}

// standIn starts standInAgent with f and tasks tasks writing into dir,
// and returns it with the pids of the supervisor and of every task
// process, each checked alive (and running as as, when set).
func standIn(t *testing.T, f form, dir string, as *Identity, tasks int, grace time.Duration) (*exec.Cmd, int, []int) {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	agent := exec.Command(self, standInArg)
	agent.Env = append(os.Environ(), "SUPERVISOR="+f.path, "LEAD="+strings.Join(f.lead, ""), "GRACE="+grace.String(),
		"DIR="+dir, "TASKS="+strconv.Itoa(tasks))
	if as != nil {
		agent.Env = append(agent.Env, "AS_DIR="+as.Dir)
	}
	// A file, not a pipe: the tasks inherit it, and Wait would wait for
	// them to close a pipe.
	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	require.NoError(t, err)
	defer stderr.Close()
	agent.Stderr = stderr
	require.NoError(t, agent.Start())
	t.Cleanup(func() { _ = agent.Process.Kill(); _ = agent.Wait() })
	sup := proctest.PidFromFile(t, filepath.Join(dir, "supervisor"))
	t.Cleanup(func() { _ = syscall.Kill(sup, syscall.SIGKILL) })
	var pids []int
	for i := range tasks {
		for _, name := range []string{"leader", "stubborn", "child", "grandchild"} {
			pid := proctest.PidFromFile(t, filepath.Join(dir, fmt.Sprintf("%d-%s", i, name)))
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			require.False(t, proctest.Gone(pid), "%d-%s (pid %d) runs", i, name, pid)
			if as != nil {
				fi, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
				require.NoError(t, err)
				require.Equal(t, uint32(as.UID), fi.Sys().(*syscall.Stat_t).Uid, "pid %d runs as the task's user", pid)
			}
			pids = append(pids, pid)
		}
	}
	logged, err := os.ReadFile(stderr.Name())
	require.NoError(t, err)
	require.Empty(t, string(logged))
	return agent, sup, pids
}

// awaitGone waits until each pid is gone or deadline passes, and returns
// those still alive.
func awaitGone(pids []int, deadline time.Time) []int {
	var live []int
	for _, pid := range pids {
		gone := proctest.Gone(pid)
		for !gone && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			gone = proctest.Gone(pid)
		}
		if !gone {
			live = append(live, pid)
		}
	}
	return live
}

// TestSupervisorKillsTaskTreesWhenAgentDies SIGKILLs an agent (the
// stand-in) with two tasks running under its one supervisor, each with a
// child, a grandchild and a child that ignores SIGTERM. Every process of
// both trees must be gone within kill-grace + 1 s (the SIGTERM-ignoring
// ones by the SIGKILL that follows the grace), and the supervisor too.
// Without a supervisor, tasks ran with Setpgid only and all lived on.
func TestSupervisorKillsTaskTreesWhenAgentDies(t *testing.T) {
	t.Parallel()
	for _, f := range forms(t) {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			killTreesWithAgent(t, f, nil)
		})
	}
}

// TestSupervisorKillsAnotherUsersTaskTreeWhenAgentDies is the guarantee
// above for tasks that run as another user: the supervisor, still the
// agent's user, kills trees it does not own.
func TestSupervisorKillsAnotherUsersTaskTreeWhenAgentDies(t *testing.T) {
	t.Parallel()
	for _, f := range forms(t) {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			killTreesWithAgent(t, f, nobody(t))
		})
	}
}

func killTreesWithAgent(t *testing.T, f form, as *Identity) {
	dir := t.TempDir()
	if as != nil {
		dir = as.Dir // the tasks write their pid files there
	}
	const grace = 500 * time.Millisecond
	agent, sup, pids := standIn(t, f, dir, as, 2, grace)
	require.NoError(t, agent.Process.Kill())
	killed := time.Now()
	_ = agent.Wait()
	live := awaitGone(append(pids, sup), killed.Add(grace+time.Second))
	assert.Empty(t, live, "of task processes %v and supervisor %d, these are still alive %s after kill -9 of their agent (kill-grace %s)",
		pids, sup, time.Since(killed).Round(time.Millisecond), grace)
	t.Logf("task trees %v and supervisor %d gone %s after kill -9 of their agent (kill-grace %s)",
		pids, sup, time.Since(killed).Round(time.Millisecond), grace)
}

// TestSupervisorKilledEndsItsTasksStreams SIGKILLs the supervisor while
// a task runs: the task's channel closes without a last line, its Err
// says the supervisor was killed by SIGKILL, and the next Start fails
// with ErrExited. The task's tree outlives it (it lost its subreaper):
// the agent kills it (package agent, TestSupervisorKilledTaskGroupDies).
func TestSupervisorKilledEndsItsTasksStreams(t *testing.T) {
	t.Parallel()
	c := startClient(t, forms(t)[0], time.Second)
	outR, outW, err := os.Pipe()
	require.NoError(t, err)
	defer outR.Close()
	tk, err := c.Start(Request{Argv: []string{"sleep", "300"}, Env: os.Environ(), Stdout: outW, Stderr: outW})
	_ = outW.Close()
	require.NoError(t, err)
	first := <-tk.Status
	require.Equal(t, KindStarted, first.Kind)
	t.Cleanup(func() { _ = syscall.Kill(-first.N, syscall.SIGKILL) })
	require.NoError(t, syscall.Kill(c.Pid(), syscall.SIGKILL))
	_, open := <-tk.Status
	assert.False(t, open, "the task's channel closes without a last line")
	var ee *exec.ExitError
	require.ErrorAs(t, tk.Err(), &ee)
	assert.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())
	assert.ErrorIs(t, tk.Err(), ErrExited)
	assert.False(t, proctest.Gone(first.N), "the task outlives its supervisor: the agent kills it")
	_, err = c.Start(Request{Argv: []string{"true"}, Env: os.Environ(), Stdout: os.Stdout, Stderr: os.Stderr})
	assert.ErrorIs(t, err, ErrExited)
}

// TestSupervisorStopsOnSIGTERM: a SIGTERM to the supervisor kills every
// task's group and reports each leader's status (killed by SIGTERM), and
// the supervisor exits with ExitStopped.
func TestSupervisorStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	c := startClient(t, forms(t)[0], 5*time.Second)
	var tasks []*Task
	for range 2 {
		tk, err := c.Start(Request{Argv: []string{"sleep", "300"}, Env: os.Environ(), Stdout: os.Stdout, Stderr: os.Stderr})
		require.NoError(t, err)
		require.Equal(t, KindStarted, (<-tk.Status).Kind)
		tasks = append(tasks, tk)
	}
	require.NoError(t, syscall.Kill(c.Pid(), syscall.SIGTERM))
	for _, tk := range tasks {
		var got []string
		for s := range tk.Status {
			got = append(got, fmt.Sprintf("%s %d", s.Kind, s.N))
		}
		assert.Equal(t, []string{fmt.Sprintf("signaled %d", syscall.SIGTERM)}, got)
	}
	<-c.Done()
	var ee *exec.ExitError
	require.ErrorAs(t, c.Err(), &ee)
	assert.Equal(t, ExitStopped, ee.ExitCode())
}

// TestSupervisorRejectsBadArguments checks each rule is named, by both
// forms, on stderr.
// TestArgsRoundTrip: what the agent passes (Args) is what the supervisor
// reads (parseArgs), the kill grace to the millisecond.
func TestArgsRoundTrip(t *testing.T) {
	t.Parallel()
	o, err := parseArgs(Args(4242, 1500*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, options{parent: 4242, grace: 1500 * time.Millisecond}, o)
	o, err = parseArgs(Args(7, 0))
	require.NoError(t, err)
	assert.Equal(t, options{parent: 7, grace: 0}, o)
}

func TestSupervisorRejectsBadArguments(t *testing.T) {
	t.Parallel()
	pid := strconv.Itoa(os.Getpid())
	for _, f := range forms(t) {
		for want, args := range map[string][]string{
			"--parent-pid: must be a pid greater than 0":  {"--kill-grace", "1s"},
			"--kill-grace: must not be negative":          {"--parent-pid", pid, "--kill-grace", "-1s"},
			"unexpected argument \"true\"":                {"--parent-pid", pid, "--", "true"},
			"invalid value \"soon\" for flag -kill-grace": {"--parent-pid", pid, "--kill-grace", "soon"},
		} {
			out, err := exec.Command(f.path, append(append([]string{}, f.lead...), args...)...).CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "%s %v: %s", f.name, args, out)
			assert.Equal(t, ExitFailed, ee.ExitCode(), "%s %v", f.name, args)
			assert.Contains(t, string(out), want, "%s %v", f.name, args)
		}
	}
}

// TestRequestRoundTrip checks that what the agent sends is what the
// supervisor decodes, arguments that look like fields included, and that
// a bad identity is refused naming its field.
func TestRequestRoundTrip(t *testing.T) {
	t.Parallel()
	argv := []string{"sh", "-c", "echo start 1 -1", "", "--uid", "0", "\n"}
	env := []string{"A=1", "B=x\ny", "EMPTY="}
	for _, as := range []*Identity{nil, {UID: 1001, GID: 1002, Groups: []int{1002, 27}, Dir: "/tmp/w"}, {UID: 7, GID: 0, Dir: "/"}} {
		b, err := Request{Argv: argv, Env: env, As: as}.encode(42)
		require.NoError(t, err)
		r, err := decodeRequest(b[4:])
		require.NoError(t, err)
		assert.Equal(t, request{id: 42, as: as, argv: argv, env: env}, r)
	}
	b, err := Request{Argv: []string{"true"}}.encode(1)
	require.NoError(t, err)
	r, err := decodeRequest(b[4:])
	require.NoError(t, err)
	assert.Empty(t, r.env)
	_, err = Request{Argv: []string{"a\x00b"}}.encode(1)
	assert.ErrorContains(t, err, "holds a NUL byte")
	_, err = Request{}.encode(1)
	assert.ErrorContains(t, err, "empty command")
	for want, as := range map[string]*Identity{
		"uid: must be greater than 0":  {UID: 0, GID: 0, Dir: "/"},
		"dir: required with uid":       {UID: 5, GID: 5, Dir: "rel"},
		"gid: required with uid":       {UID: 5, GID: -2, Dir: "/"},
		"groups: \"-3\" must be a com": {UID: 5, GID: 5, Groups: []int{-3}, Dir: "/"},
	} {
		b, err := Request{Argv: []string{"true"}, As: as}.encode(9)
		require.NoError(t, err)
		_, err = decodeRequest(b[4:])
		assert.ErrorContains(t, err, "request 9: "+want)
	}
}

// TestParseStatusDropsUnparsableLines feeds parseStatus what a
// supervisor writes, a line cut short and one of an unknown number among
// them.
func TestParseStatusDropsUnparsableLines(t *testing.T) {
	t.Parallel()
	in := "started 1 41\nstart_failed 2 exec: \"x\": not found\nexited 1 x\nsignaled 1 9\nleftover 3 41\nbogus 1 1\nexited x 1\nexit"
	var got []Status
	for _, l := range strings.Split(in, "\n") {
		if s, ok := parseStatus(l); ok {
			got = append(got, s)
		}
	}
	assert.Equal(t, []Status{
		{ID: 1, Kind: KindStarted, N: 41},
		{ID: 2, Kind: KindStartFailed, Text: `exec: "x": not found`},
		{ID: 1, Kind: KindSignaled, N: 9},
		{ID: 3, Kind: KindLeftover, N: 41},
	}, got)
	for _, s := range got {
		back, ok := parseStatus(strings.TrimSuffix(s.line(), "\n"))
		assert.True(t, ok)
		assert.Equal(t, s, back)
	}
}

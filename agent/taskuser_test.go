package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/state"
)

// needRoot skips a test of switching users where only root can switch.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("switching to another user needs root: run the tests as root, as make test and CI do (README)")
	}
}

// enqueueAs queues a task that names runAs in its run_as_user.
func (f *fakeAPI) enqueueAs(runAs string, command ...string) protocol.ClaimedTask {
	task := f.enqueue(0, nil, command...)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue[len(f.queue)-1].RunAsUser = runAs
	task.RunAsUser = runAs
	return task
}

// TestTaskUserRunsTasksAsThatUser runs, on an agent with --task-user
// daemon and --task-users-allowed nobody, a task without run_as_user
// (daemon), one naming nobody (allowed) and one naming bin (refused with
// start_failed), and checks each one's ids, identity variables and
// working directory, which it may write and which is gone afterwards.
func TestTaskUserRunsTasksAsThatUser(t *testing.T) {
	t.Parallel()
	needRoot(t)
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, func(c *Config) {
		c.TaskUser, c.TaskUsersAllowed = "daemon", []string{"nobody"}
	})
	script := sh(`echo "$(id -u) $(id -g) $HOME $USER $LOGNAME"; pwd; echo x > out && echo wrote; ls -A /root >/dev/null 2>&1 || echo no-root`)
	asDaemon := f.enqueue(0, map[string]string{"HOME": "/dag-wins"}, script...)
	asNobody := f.enqueueAs("nobody", script...)
	asBin := f.enqueueAs("bin", script...)

	for task, want := range map[string]string{asDaemon.AttemptID: "1 1 /dag-wins daemon daemon", asNobody.AttemptID: "65534 65534 /nonexistent nobody nobody"} {
		c := f.waitCompletion(task, 5*time.Second)
		require.Equal(t, state.OutcomeSuccess, c.Outcome, "%+v", c)
		var got []string
		for _, l := range f.lines(task) {
			got = append(got, l.Line)
		}
		require.Len(t, got, 4, "%q", got)
		assert.Equal(t, want, got[0])
		assert.True(t, strings.HasPrefix(got[1], os.TempDir()+"/vigil-agent-tasks-"), "working directory %s", got[1])
		assert.Equal(t, []string{"wrote", "no-root"}, got[2:])
		assert.NoDirExists(t, got[1], "the attempt's working directory is removed when it ends")
	}
	c := f.waitCompletion(asBin.AttemptID, 5*time.Second)
	assert.Equal(t, state.FailureStartFailed, c.Failure)
	assert.Equal(t, `run_as_user "bin" is not allowed on agent test-agent (its --task-users-allowed: nobody)`, c.Error)
	assert.Empty(t, f.lines(asBin.AttemptID)[1:], "nothing ran")
}

// TestTaskUserConfigErrors checks each refusal names the field and why.
func TestTaskUserConfigErrors(t *testing.T) {
	base := Config{Servers: []string{"http://127.0.0.1:1"}}
	cases := []struct {
		name string
		euid int
		edit func(*Config)
		want string
	}{
		{"not root", 1000, func(c *Config) { c.TaskUser = "nobody" },
			"TaskUser needs the agent to run as root: it starts each task as another OS user (setuid), and this agent runs as uid 1000"},
		{"allowed list not root", 1000, func(c *Config) { c.TaskUsersAllowed = []string{"nobody"} },
			"TaskUsersAllowed needs the agent to run as root"},
		{"unknown user", 0, func(c *Config) { c.TaskUser = "vigil-no-such-user" },
			`TaskUser "vigil-no-such-user": no such OS user on this host`},
		{"root", 0, func(c *Config) { c.TaskUsersAllowed = []string{"nobody", "root"} },
			`TaskUsersAllowed[1] "root" has uid 0: a task run as root reaches everything the agent does`},
		{"bad name", 0, func(c *Config) { c.TaskUser = "../x" },
			`TaskUser "../x" must be an OS user name`},
	}
	for _, tc := range cases {
		geteuid = func() int { return tc.euid }
		cfg := base
		tc.edit(&cfg)
		_, err := New(cfg)
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}
	geteuid = os.Geteuid
}

// TestTaskUserReaches checks the search-permission walk that stops the
// agent from placing working directories where its task user cannot go.
func TestTaskUserReaches(t *testing.T) {
	t.Parallel()
	needRoot(t)
	top, err := os.MkdirTemp("", "vigil-reach-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(top) })
	inner := filepath.Join(top, "a", "b")
	require.NoError(t, os.MkdirAll(inner, 0o755))
	nobody := &taskUser{name: "nobody", uid: 65534, gid: 65534, groups: []int{65534}}
	require.NoError(t, os.Chmod(top, 0o711))
	assert.NoError(t, nobody.reaches(inner))

	require.NoError(t, os.Chmod(top, 0o700))
	err = nobody.reaches(inner)
	require.Error(t, err)
	assert.Equal(t, "user nobody cannot enter "+top+" (mode 0700, owner 0:0)", err.Error())

	require.NoError(t, os.Chown(top, 0, 65534))
	require.NoError(t, os.Chmod(top, 0o710))
	assert.NoError(t, nobody.reaches(inner), "through its group")
	require.NoError(t, os.Chown(top, 65534, 0))
	require.NoError(t, os.Chmod(top, 0o700))
	assert.NoError(t, nobody.reaches(inner), "as the owner")
}

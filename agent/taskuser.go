package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/vigil-sched/vigil/agent/supervisor"
	"github.com/vigil-sched/vigil/dag"
)

// taskUser is an OS user tasks may run as (Config.TaskUser,
// Config.TaskUsersAllowed), resolved once when the agent is built.
type taskUser struct {
	name   string
	uid    int
	gid    int
	groups []int
	home   string
}

// geteuid is os.Geteuid; a test of the refusal without root replaces it.
var geteuid = os.Geteuid

// taskUsers resolves Config.TaskUser and Config.TaskUsersAllowed. Both
// need root: the supervisor switches users with setgroups, setgid and
// setuid, which only root may call. Each user must exist and not be root;
// the errors name the field, the user and the rule.
func (c *Config) taskUsers() (map[string]*taskUser, error) {
	if c.TaskUser == "" && len(c.TaskUsersAllowed) == 0 {
		return nil, nil
	}
	field := "TaskUser"
	if c.TaskUser == "" {
		field = "TaskUsersAllowed"
	}
	if euid := geteuid(); euid != 0 {
		return nil, fieldErr(field, fmt.Sprintf("needs the agent to run as root: it starts each task as another OS user "+
			"(setuid), and this agent runs as uid %d; run it as root or leave the option out", euid))
	}
	users := make(map[string]*taskUser)
	names := slices.Clone(c.TaskUsersAllowed)
	if c.TaskUser != "" {
		names = append(names, c.TaskUser)
	}
	for i, name := range names {
		f := fmt.Sprintf("TaskUsersAllowed[%d]", i)
		if i == len(c.TaskUsersAllowed) {
			f = "TaskUser"
		}
		if users[name] != nil {
			continue
		}
		u, err := lookupTaskUser(name)
		if err != nil {
			return nil, fieldErr(f, err.Error())
		}
		users[name] = u
	}
	return users, nil
}

// lookupTaskUser resolves name to its ids, groups and home directory.
func lookupTaskUser(name string) (*taskUser, error) {
	if !dag.ValidUserName(name) {
		return nil, fmt.Errorf("%q must be an OS user name: %s", name, dag.RunAsUserRule)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("%q: no such OS user on this host: %v", name, err)
	}
	t := &taskUser{name: name, home: u.HomeDir}
	var err1, err2 error
	t.uid, err1 = strconv.Atoi(u.Uid)
	t.gid, err2 = strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("%q: non-numeric uid or gid: %v", name, err)
	}
	if t.uid == 0 {
		return nil, fmt.Errorf("%q has uid 0: a task run as root reaches everything the agent does", name)
	}
	gids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("%q: list its groups: %v", name, err)
	}
	for _, g := range gids {
		n, err := strconv.Atoi(g)
		if err != nil {
			return nil, fmt.Errorf("%q: non-numeric group id %q", name, g)
		}
		t.groups = append(t.groups, n)
	}
	return t, nil
}

// taskUserFor is the user task t runs as: its run_as_user, which must be
// in Config.TaskUsersAllowed, else Config.TaskUser; nil: the agent's own.
// The error is the try's start_failed reason.
func (a *Agent) taskUserFor(runAs string) (*taskUser, error) {
	if runAs == "" {
		if a.cfg.TaskUser == "" {
			return nil, nil
		}
		return a.users[a.cfg.TaskUser], nil
	}
	if !slices.Contains(a.cfg.TaskUsersAllowed, runAs) {
		allowed := "none: --task-users-allowed is empty"
		if len(a.cfg.TaskUsersAllowed) > 0 {
			allowed = strings.Join(a.cfg.TaskUsersAllowed, ", ")
		}
		return nil, fmt.Errorf("run_as_user %q is not allowed on agent %s (its --task-users-allowed: %s)", runAs, a.cfg.Name, allowed)
	}
	return a.users[runAs], nil
}

// workDir creates the working directory of one attempt run as u: a fresh
// directory owned by u, mode 0700, under the agent's root-owned task
// directory (made at the first call, mode 0711 so that each user reaches
// only its own). The caller removes it when the attempt ends.
func (a *Agent) workDir(u *taskUser) (string, error) {
	a.workMu.Lock()
	defer a.workMu.Unlock()
	parent := os.TempDir()
	if a.workBase != "" {
		parent = filepath.Dir(a.workBase)
	}
	if err := u.reaches(parent); err != nil { // a few stat calls per start, for each user
		return "", fmt.Errorf("task working directories: %w; set the agent's TMPDIR to a directory every task user can enter, such as /tmp", err)
	}
	base, err := a.workBaseLocked()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(base, "attempt-")
	if err != nil {
		return "", fmt.Errorf("working directory for user %s: %w", u.name, err)
	}
	if err := os.Chown(dir, u.uid, u.gid); err != nil {
		_ = os.Remove(dir)
		return "", fmt.Errorf("working directory for user %s: %w", u.name, err)
	}
	return dir, nil
}

// workBaseLocked is the agent's task directory, made at the first call:
// owned by the agent's user (root with task users), mode 0711, so that a
// task reaches only the paths below it that it was given. The caller
// holds workMu.
func (a *Agent) workBaseLocked() (string, error) {
	if a.workBase != "" {
		return a.workBase, nil
	}
	base, err := os.MkdirTemp("", "vigil-agent-tasks-")
	if err != nil {
		return "", fmt.Errorf("task working directories: %w", err)
	}
	if err := os.Chmod(base, 0o711); err != nil {
		return "", fmt.Errorf("task working directories: %w", err)
	}
	a.workBase = base
	return base, nil
}

// removeWorkDir removes an attempt's working directory once it has
// ended. RemoveAll neither follows nor leaves the task's symlinks.
func (a *Agent) removeWorkDir(dir string, log *slog.Logger) {
	if err := os.RemoveAll(dir); err != nil {
		log.Warn("remove the task's working directory", "dir", dir, "err", err)
	}
}

// removeWorkBase removes the task directory at the agent's end.
func (a *Agent) removeWorkBase() {
	a.workMu.Lock()
	defer a.workMu.Unlock()
	if a.workBase != "" {
		if err := os.RemoveAll(a.workBase); err != nil {
			a.log.Warn("remove task working directories", "dir", a.workBase, "err", err)
		}
		a.workBase = ""
	}
}

// reaches reports, as an error naming the directory, whether u may pass
// through dir and each of its ancestors (search permission for u's uid,
// primary or supplementary group, or others): a working directory below
// one it cannot enter would fail every start with a bare chdir error.
func (u *taskUser) reaches(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		mode := fi.Mode().Perm()
		var bit os.FileMode = 0o001
		switch {
		case int(st.Uid) == u.uid:
			bit = 0o100
		case int(st.Gid) == u.gid || slices.Contains(u.groups, int(st.Gid)):
			bit = 0o010
		}
		if mode&bit == 0 {
			return fmt.Errorf("user %s cannot enter %s (mode %04o, owner %d:%d)", u.name, p, mode, st.Uid, st.Gid)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// identity is what the supervisor switches to for u in dir.
func (u *taskUser) identity(dir string) *supervisor.Identity {
	return &supervisor.Identity{UID: u.uid, GID: u.gid, Groups: u.groups, Dir: dir}
}

// userEnv are the variables that name u to the task; they replace the
// agent's own HOME, USER and LOGNAME, as login(1) sets them.
func (u *taskUser) userEnv() map[string]string {
	return map[string]string{"HOME": u.home, "USER": u.name, "LOGNAME": u.name}
}

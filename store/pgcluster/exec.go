package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serverUser is the OS user the server runs as when Vigil runs as root:
// PostgreSQL refuses to run as root (docs/design.md §11).
const serverUser = "postgres"

// runner runs PostgreSQL binaries, through `runuser -u postgres --` when the
// process is root and directly otherwise.
type runner struct {
	runuser  string // empty: run directly
	uid, gid int    // owner to give files we create; -1 when not root
}

// newRunner inspects the effective user. As root it needs the postgres OS
// user and runuser; it creates neither.
func newRunner() (*runner, error) {
	if os.Geteuid() != 0 {
		return &runner{uid: -1, gid: -1}, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root, PostgreSQL must run as the OS user %q, "+
			"but it cannot be found (%v): create it (installing the postgresql package does), "+
			"run Vigil as a non-root user, or pass --database-url", serverUser, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("pgcluster: OS user %q has non-numeric uid/gid %q/%q", serverUser, u.Uid, u.Gid)
	}
	if uid == 0 {
		return nil, fmt.Errorf("pgcluster: OS user %q has uid 0; PostgreSQL refuses to run as root", serverUser)
	}
	ru, err := exec.LookPath("runuser")
	if err != nil {
		for _, p := range []string{"/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"} {
			if isExecutable(p) {
				ru, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root, PostgreSQL binaries must run through "+
			"`runuser -u %s --`, but runuser is not installed (util-linux): %w", serverUser, err)
	}
	return &runner{runuser: ru, uid: uid, gid: gid}, nil
}

// asRoot reports whether binaries run through runuser and files we create
// must be chowned to the server user.
func (r *runner) asRoot() bool { return r.runuser != "" }

// cmdError is a failed command with its combined output.
type cmdError struct {
	args   []string
	code   int // exit code; -1 if it did not exit normally
	output string
	err    error
}

func (e *cmdError) Error() string {
	msg := fmt.Sprintf("%s: %v", strings.Join(e.args, " "), e.err)
	if e.output != "" {
		msg += "\n" + e.output
	}
	return msg
}

func (e *cmdError) Unwrap() error { return e.err }

// run runs bin with args and returns its combined output. A non-zero exit
// is a *cmdError. On ctx cancellation the command gets SIGTERM (runuser
// forwards it; initdb and pg_ctl clean up on it), then SIGKILL after 5s.
func (r *runner) run(ctx context.Context, bin string, args ...string) (string, error) {
	return r.runIn(ctx, "", bin, args...)
}

// runIn is run with stdin as the command's standard input.
func (r *runner) runIn(ctx context.Context, stdin, bin string, args ...string) (string, error) {
	argv := append([]string{bin}, args...)
	if r.asRoot() {
		argv = append([]string{r.runuser, "-u", serverUser, "--"}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/" // the server user may not be able to enter our working directory
	cmd.Env = childEnv()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	output := strings.TrimSpace(out.String())
	if err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = fmt.Errorf("%w (%w)", err, ctxErr)
		}
		return output, &cmdError{args: argv, code: code, output: output, err: err}
	}
	return output, nil
}

// exitCode returns the exit code of a *cmdError, or -1.
func exitCode(err error) int {
	var ce *cmdError
	if errors.As(err, &ce) {
		return ce.code
	}
	return -1
}

// childEnv is our environment without the libpq/server variables (PGDATA,
// PGPORT, PGOPTIONS, ...) that would override the explicit flags, and with
// English messages so the output we match and report is predictable.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_ALL=") || strings.HasPrefix(kv, "LC_MESSAGES=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_MESSAGES=C")
}

// Package proctest serves the tests that start real processes: it builds
// the module's commands (vigil, and vigil-supervise beside it as it is
// installed, adr/0026-small-supervisor-program.md) and watches the pids
// that tasks write.
package proctest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Commands are the module's command packages that ship together, so that
// a test builds what an install has.
var Commands = []string{"./cmd/vigil", "./cmd/vigil-supervise"}

// EnvBuildTags names the variable whose value Build passes to go build
// -tags: scripts/mutants.sh builds the commands a test starts with a
// mutant's tag, as the test binary itself is built.
const EnvBuildTags = "VIGIL_BUILD_TAGS"

// timeout bounds one go build: a cold build cache compiles every
// dependency.
const timeout = 5 * time.Minute

// Build compiles the command packages pkgs (module-relative, like
// "./cmd/vigil-supervise") of the module that contains the working
// directory (a test's package directory) into dir, each as dir/<the
// package's directory name>. The error carries the go command's output.
func Build(dir string, pkgs ...string) error { return BuildTags(dir, "", pkgs...) }

// BuildTags is Build with the comma-separated build tags tags (none when
// empty), for a binary that carries test hooks (internal/testhook.Tag).
func BuildTags(dir, tags string, pkgs ...string) error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return errors.New("go env GOMOD: not inside a module")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// -o with a trailing separator writes every named command into dir.
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if env := os.Getenv(EnvBuildTags); env != "" { // a mutant's tag beside the test's own
		tags = strings.Trim(tags+","+env, ",")
	}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(args, pkgs...)
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir = filepath.Dir(gomod)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out)
	}
	return nil
}

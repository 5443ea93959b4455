package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// depsScript is the one place that installs what `make run` and
// `make test` need (scripts/deps.sh).
const depsScript = "../scripts/deps.sh"

// TestDepsScriptIsQuietWhenReady: `make test` has just run the script, so
// everything it checks is present and it must print nothing and exit 0.
func TestDepsScriptIsQuietWhenReady(t *testing.T) {
	for _, what := range []string{"run", "test"} {
		out, err := exec.Command("bash", depsScript, what).CombinedOutput()
		require.NoError(t, err, "%s: %s", what, out)
		require.Empty(t, string(out), what)
	}
}

// TestDepsScriptStopsAtOnceWithoutAptGet runs the script where node, npm,
// promtool and apt-get are not on PATH: it must stop with exit 1 and one
// message naming every missing package and the command to install them,
// never try to install anything.
func TestDepsScriptStopsAtOnceWithoutAptGet(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"bash", "id"} {
		path, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(path, filepath.Join(bin, tool)))
	}
	cmd := exec.Command(filepath.Join(bin, "bash"), depsScript, "test")
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 1, exit.ExitCode(), "%s", out)
	msg := string(out)
	require.Contains(t, msg, "make test needs packages this machine lacks: nodejs npm prometheus")
	require.Contains(t, msg, "This machine has no apt-get")
	require.Contains(t, msg, "apt-get install -y --no-install-recommends nodejs npm prometheus")
	require.NotContains(t, msg, "installing")
	// initdb is found under /usr/lib/postgresql and chromium at its Debian
	// path whatever PATH says, so neither is named.
	require.False(t, strings.Contains(msg, "postgresql:") || strings.Contains(msg, "chromium"), msg)
}

// TestDepsScriptRefusesAnUnknownTarget: a typo is a usage error, not a
// silent install of the test set.
func TestDepsScriptRefusesAnUnknownTarget(t *testing.T) {
	out, err := exec.Command("bash", depsScript, "tset").CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 2, exit.ExitCode())
	require.Contains(t, string(out), "got 'tset'")
}

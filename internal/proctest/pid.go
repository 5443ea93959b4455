package proctest

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// PidFromFile waits up to 5 s for a shell to write a pid and a newline
// into path (written whole, or renamed into place) and returns the pid;
// it fails t when none appears.
func PidFromFile(t testing.TB, path string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 5*time.Second, 10*time.Millisecond, "no pid in %s", path)
	return pid
}

// Gone reports whether pid no longer runs: kill(pid, 0) fails with
// ESRCH, or the process is a zombie. The zombie case exists because an
// orphaned grandchild is reparented to PID 1, and a container's PID 1 may
// never reap it; a zombie runs no code and holds no resources but its slot.
// Once true it stays true (barring pid reuse): a read of /proc/<pid>/stat
// that races the zombie's reaping fails with ESRCH, not ENOENT, and counts
// as gone (a CI run saw a zombie reported gone, then alive on that read).
func Gone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return os.IsNotExist(err) || errors.Is(err, syscall.ESRCH)
	}
	// Format: "pid (comm) S ..."; comm may contain spaces, so cut at ')'.
	i := strings.LastIndexByte(string(stat), ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

package agent

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as its own task supervisor. Config's
// SupervisorPath defaults to os.Executable(), which in these tests is the
// test binary, not vigil; started as `<test binary> __supervise ...` it
// runs Supervise, the very code `vigil __supervise` runs, instead of the
// tests. So every task in these tests runs under the real supervisor; the
// vigil binary's hidden command itself is covered by the e2e tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == SupervisorCommand {
		os.Exit(Supervise(os.Args[2:]))
	}
	os.Exit(m.Run())
}

package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vigil-sched/vigil/agent/supervisor"
	"github.com/vigil-sched/vigil/internal/proctest"
)

// supervisorBin is cmd/vigil-supervise, built by TestMain: every task of
// these tests runs under it (startAgent), as tasks of an installed vigil
// do. The `vigil __supervise` form runs the same supervisor.Run; package
// supervisor's tests and the e2e tests cover it.
var supervisorBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vigil-agent-test-*")
	if err == nil {
		err = proctest.Build(dir, "./cmd/"+supervisor.ProgramName)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent tests:", err)
		os.Exit(1)
	}
	supervisorBin = filepath.Join(dir, supervisor.ProgramName)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Command vigil-supervise is the task supervisor an agent starts once and
// runs all its tasks under (package agent/supervisor): each task in its
// own process group, its exact wait status reported to the agent, and
// every task's group killed when the agent dies. It is `vigil
// __supervise` without the rest of vigil
// (adr/0026-small-supervisor-program.md,
// adr/0035-one-supervisor-per-agent.md). It is installed beside vigil;
// the agent falls back to `vigil __supervise` when it is missing.
//
// Usage (the agent builds it with supervisor.Args, and sends the tasks
// on descriptor 3):
//
//	vigil-supervise --parent-pid PID --kill-grace DURATION
package main

import (
	"os"

	"github.com/vigil-sched/vigil/agent/supervisor"
)

func main() {
	os.Exit(supervisor.Run(os.Args[1:]))
}

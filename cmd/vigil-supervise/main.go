// Command vigil-supervise is the task supervisor the agent starts once per
// task instance (package agent/supervisor): it runs the task in its own
// process group, reports its exact wait status on descriptor 3, and kills
// the group when the agent dies. It is `vigil __supervise` without the
// rest of vigil, so that a start costs what fork and exec cost rather
// than the whole binary's initialisation (adr/0026-small-supervisor-program.md).
// It is installed beside vigil; the agent falls back to `vigil
// __supervise` when it is missing.
//
// Usage (the agent builds it with supervisor.Args):
//
//	vigil-supervise --parent-pid PID --kill-grace DURATION \
//	    [--uid UID --gid GID [--groups GID,...] --dir DIR] -- COMMAND [ARG...]
package main

import (
	"os"

	"github.com/vigil-sched/vigil/agent/supervisor"
)

func main() {
	os.Exit(supervisor.Run(os.Args[1:]))
}

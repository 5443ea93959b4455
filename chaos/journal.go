package chaos

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// taskScript is the command every workload task runs: sh task.sh JOURNAL
// LINES STEP_MS FAIL_FIRST. It appends a start record to the journal
// (O_APPEND: one write per record, so concurrent tasks never interleave
// within a line), prints LINES log lines STEP_MS apart, appends an end
// record and exits 1 on its first try when FAIL_FIRST is 1. A task killed
// before its end (a timeout, a lost agent) leaves only its start record.
// It uses the shell and date only, nothing of Vigil's.
const taskScript = `#!/bin/sh
j=$1; lines=$2; step=$3; failfirst=$4
code=0
if [ "$failfirst" = 1 ] && [ "$VIGIL_TRY_NUMBER" = 1 ]; then code=1; fi
echo "S $VIGIL_ATTEMPT_ID $VIGIL_TI_ID $VIGIL_RUN_ID $VIGIL_TASK_ID $VIGIL_TRY_NUMBER $$ $(basename "$TMPDIR") $(date +%s%N)" >> "$j"
sec=$(awk "BEGIN { printf \"%.3f\", $step / 1000 }")
i=0
while [ $i -lt "$lines" ]; do
  i=$((i + 1))
  echo "line $i of $lines ($VIGIL_TASK_ID try $VIGIL_TRY_NUMBER)"
  sleep "$sec"
done
echo "E $VIGIL_ATTEMPT_ID $$ $code $lines $(date +%s%N)" >> "$j"
exit $code
`

// journal reads the task journal as it grows.
type journal struct {
	path string
	mu   sync.Mutex
	off  int64
	open map[int]bool // pids with a start record and no end record yet
}

func newJournal(dir string) (*journal, string, error) {
	script := filepath.Join(dir, "task.sh")
	if err := os.WriteFile(script, []byte(taskScript), 0o755); err != nil {
		return nil, "", err
	}
	j := &journal{path: filepath.Join(dir, "journal.log"), open: map[int]bool{}}
	f, err := os.OpenFile(j.path, os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		return nil, "", err
	}
	return j, script, f.Close()
}

// openPids returns the pids started and not yet ended, reading what the
// journal gained since the last call.
func (j *journal) openPids() []int {
	j.mu.Lock()
	defer j.mu.Unlock()
	f, err := os.Open(j.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(j.off, io.SeekStart); err != nil {
		return nil
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break // a partial last line is read again next time
		}
		j.off += int64(len(line))
		fs := strings.Fields(line)
		switch {
		case len(fs) >= 9 && fs[0] == "S":
			if pid, err := strconv.Atoi(fs[6]); err == nil {
				j.open[pid] = true
			}
		case len(fs) >= 6 && fs[0] == "E":
			if pid, err := strconv.Atoi(fs[2]); err == nil {
				delete(j.open, pid)
			}
		}
	}
	out := make([]int, 0, len(j.open))
	for pid := range j.open {
		out = append(out, pid)
	}
	return out
}

func (j *journal) closePid(pid int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.open, pid)
}

// parseJournal reads the whole journal into executions, by attempt. gone
// gives the observed death of pids without an end record.
func parseJournal(path string, gone map[int]time.Time) ([]Execution, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byAttempt := map[string]*Execution{}
	var order []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) == 9 && fs[0] == "S":
			e := &Execution{AttemptID: fs[1], TaskID: fs[4], Instance: fs[7]}
			var err error
			e.TIID, err = atoi64(fs[2], err)
			e.RunID, err = atoi64(fs[3], err)
			try, err := atoi64(fs[5], err)
			pid, err := atoi64(fs[6], err)
			ns, err := atoi64(fs[8], err)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: start record: %w", path, n, err)
			}
			e.Try, e.PID, e.Start = int(try), int(pid), time.Unix(0, ns)
			byAttempt[e.AttemptID] = e
			order = append(order, e.AttemptID)
		case len(fs) == 6 && fs[0] == "E":
			e := byAttempt[fs[1]]
			if e == nil {
				return nil, fmt.Errorf("%s:%d: end record of attempt %s without a start", path, n, fs[1])
			}
			var err error
			code, err := atoi64(fs[3], err)
			printed, err := atoi64(fs[4], err)
			ns, err := atoi64(fs[5], err)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: end record: %w", path, n, err)
			}
			e.Exit, e.Printed, e.End = int(code), int(printed), time.Unix(0, ns)
		default:
			return nil, fmt.Errorf("%s:%d: not a journal record: %q", path, n, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]Execution, 0, len(order))
	for _, id := range order {
		e := byAttempt[id]
		if !e.HasEnd() {
			e.Gone = gone[e.PID]
		}
		out = append(out, *e)
	}
	return out, nil
}

func atoi64(s string, prev error) (int64, error) {
	if prev != nil {
		return 0, prev
	}
	return strconv.ParseInt(s, 10, 64)
}

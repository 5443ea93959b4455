package agent

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/state"
)

// testOutPipe is an outPipe whose task end the test holds: the agent's
// copy (p.w) is a spare pipe's, closed by started as usual.
func testOutPipe(t *testing.T) (*outPipe, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	spareR, spareW, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { _, _, _ = w.Close(), spareR.Close(), r.Close() })
	return &outPipe{r: r, w: spareW, done: make(chan struct{})}, w
}

// gatedWriter holds every Write until open is closed: backpressure.
type gatedWriter struct {
	open chan struct{}
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (g *gatedWriter) Write(b []byte) (int, error) {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(b)
}

// A loud task's tail waits in the pipe while the control plane is slow to
// take lines; the task has exited. However long the agent is held back,
// nothing is cut: the bound does not count time spent waiting on dst.
// (os/exec's WaitDelay, used before, closed the pipe a fixed time after
// the exit and cut the tail.)
func TestOutPipeNeverCutsATailHeldByBackpressure(t *testing.T) {
	p, task := testOutPipe(t)
	dst := &gatedWriter{open: make(chan struct{})}
	p.started(dst)
	tail := bytes.Repeat([]byte("line\n"), 10000) // 50 KB: fits the pipe
	_, err := task.Write(tail)
	require.NoError(t, err)
	require.NoError(t, task.Close()) // the task has exited
	const bound = 20 * time.Millisecond
	res := make(chan bool, 1)
	go func() { res <- p.drain(bound) }()
	time.Sleep(10 * bound) // held back ten times the bound before a line is taken
	close(dst.open)
	assert.True(t, <-res, "the tail is read to EOF")
	assert.Equal(t, len(tail), dst.buf.Len())
}

// A descendant holds the pipe open and says nothing: drain gives up after
// the bound and reports the cut.
func TestOutPipeCutsASilentHolder(t *testing.T) {
	p, _ := testOutPipe(t)
	dst := &gatedWriter{open: make(chan struct{})}
	close(dst.open)
	p.started(dst)
	assert.False(t, p.drain(20*time.Millisecond))
}

// A descendant holds the pipe open and keeps printing to a dst that
// takes everything at once: the bound still ends the drain.
func TestOutPipeCutsAChattyHolder(t *testing.T) {
	p, task := testOutPipe(t)
	dst := &gatedWriter{open: make(chan struct{})}
	close(dst.open)
	p.started(dst)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := task.Write([]byte("chatter\n")); err != nil {
				return
			}
		}
	}()
	assert.False(t, p.drain(50*time.Millisecond))
}

// A task whose process leaves a descendant outside its process group
// (setsid) holding stdout: the supervisor cannot kill it, so the attempt
// ends after the drain bound with what was printed and a system line
// saying the rest is not captured.
func TestTaskEndsWhenAnEscapedDescendantHoldsItsOutput(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	srv := f.serve()
	startAgent(t, []string{srv.URL}, nil)
	pidFile := t.TempDir() + "/escaped.pid"
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			var pid int
			if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	task := f.enqueue(0, nil, "sh", "-c", `setsid sh -c 'echo $$ > `+pidFile+`; exec sleep 60' & `+
		`while [ ! -s `+pidFile+` ]; do sleep 0.01; done; echo printed`)
	c := f.waitCompletion(task.AttemptID, 30*time.Second)
	assert.Equal(t, state.OutcomeSuccess, c.Outcome)
	var text []string
	require.Eventually(t, func() bool {
		text = text[:0]
		for _, l := range f.lines(task.AttemptID) {
			text = append(text, l.Line)
		}
		return len(text) >= 2 && strings.Contains(strings.Join(text, "\n"), "not captured")
	}, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, text, "printed")
	assert.Contains(t, strings.Join(text, "\n"), "output after this point is not captured")
}

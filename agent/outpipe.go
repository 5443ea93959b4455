package agent

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// copyBufs recycles the 32 KiB read buffers of outPipe copies. Each
// attempt has two; allocated afresh they were most of the bytes Lite's
// agents allocated in a no-op burn-down, and 1.7 % of the machine in
// allocation alone, besides the garbage collection they drove
// (docs/performance.md). A buffer holds nothing once its copy has ended:
// every Read overwrites what the next Write passes on, and the line
// splitter copies what it keeps.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// outPipe carries one output stream of a task (stdout or stderr) into the
// agent. The agent owns the pipe, not os/exec: exec's WaitDelay closes
// its pipes a fixed time after the process exits, even while the agent
// is still reading them at the control plane's pace (a loud task's last
// lines wait in the pipe while backpressure holds the reader), which cut
// a task's tail (issue 23: a loud task is slowed, never cut). Here the
// bound counts only the time the agent is not waiting for the control
// plane to take lines: a descendant outside the task's process group
// that keeps the pipe open, silent or printing, is cut off after the
// bound, and a loud task's tail is read however slowly it ships.
type outPipe struct {
	r, w *os.File
	done chan struct{} // closed when the copy has read EOF or an error
	// blocked is the time the copy has spent writing into dst (ns), where
	// backpressure holds it; busy is set while it writes.
	blocked atomic.Int64
	busy    atomic.Bool
}

// newOutPipe makes the pipe; w is the task's end, for exec.Cmd.Stdout or
// Stderr (an *os.File, so exec passes it on as it is).
func newOutPipe() (*outPipe, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &outPipe{r: r, w: w, done: make(chan struct{})}, nil
}

// started closes the agent's copy of the task's end (the child has its
// own now, so EOF comes when the task side closes) and copies what the
// task writes into dst until EOF.
func (p *outPipe) started(dst io.Writer) {
	_ = p.w.Close()
	go func() {
		defer close(p.done)
		bp := copyBufs.Get().(*[]byte)
		defer copyBufs.Put(bp)
		buf := *bp
		for {
			n, err := p.r.Read(buf)
			if n > 0 {
				p.busy.Store(true)
				t := time.Now()
				_, _ = dst.Write(buf[:n])
				p.blocked.Add(int64(time.Since(t)))
				p.busy.Store(false)
			}
			if err != nil {
				return
			}
		}
	}()
}

// abandon closes both ends when the task never started.
func (p *outPipe) abandon() { _, _ = p.r.Close(), p.w.Close() }

// drain waits, after the process has exited, for the copy to reach EOF.
// Once bound has passed since the exit, not counting the time the copy
// spent writing into dst, it closes the pipe, stops the copy, and reports
// false: what is written after that is not captured.
func (p *outPipe) drain(bound time.Duration) bool {
	defer func() { _ = p.r.Close() }()
	start, blocked0 := time.Now(), p.blocked.Load()
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return true
		case <-t.C:
		}
		spent := time.Since(start) - time.Duration(p.blocked.Load()-blocked0)
		if !p.busy.Load() && spent >= bound {
			_ = p.r.Close() // unblocks the Read
			<-p.done
			return false
		}
		t.Reset(max(bound-spent, 10*time.Millisecond))
	}
}

// newOutPipes makes a task's stdout and stderr pipes.
func newOutPipes() (stdout, stderr *outPipe, err error) {
	if stdout, err = newOutPipe(); err != nil {
		return nil, nil, err
	}
	if stderr, err = newOutPipe(); err != nil {
		stdout.abandon()
		return nil, nil, err
	}
	return stdout, stderr, nil
}

// errOutputHeld stands for the process's end when its output was cut by
// drain: a descendant held a pipe open, silent, past the idle bound.
var errOutputHeld = errors.New("process exited but its output stayed open and idle")

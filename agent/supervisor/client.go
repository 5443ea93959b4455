package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Client is the agent's side of one supervisor process: it starts the
// supervisor, sends it tasks, and hands each task's status lines to its
// Task. Its methods are safe for concurrent use.
type Client struct {
	cmd  *exec.Cmd
	conn *net.UnixConn
	wmu  sync.Mutex // one request at a time on conn

	mu    sync.Mutex
	next  uint64
	tasks map[uint64]chan Status // nil once the supervisor has exited
	err   error                  // why it exited; set before tasks is nil
	done  chan struct{}
}

// ErrExited is wrapped by Start's error once the supervisor has exited.
var ErrExited = errors.New("task supervisor exited")

// StartClient starts `path lead... --parent-pid <this process>
// --kill-grace grace` (Args) in its own process group, with its end of a
// new Unix stream socket as ConnFD; the other end, close-on-exec, stays
// with this process alone, so its death is the supervisor's end of file.
// The supervisor's environment is empty: each task's comes with its
// request.
func StartClient(path string, lead []string, grace time.Duration) (*Client, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket pair for the task supervisor: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "vigil-supervisor"), os.NewFile(uintptr(fds[1]), "vigil-supervisor")
	defer ours.Close() // FileConn holds a copy
	cmd := exec.Command(path, append(slices.Clip(lead), Args(os.Getpid(), grace)...)...)
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a terminal's signals to the agent's group do not reach it
	err = cmd.Start()
	_ = theirs.Close()
	if err != nil {
		return nil, err
	}
	fc, err := net.FileConn(ours)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("task supervisor connection: %w", err)
	}
	c := &Client{cmd: cmd, conn: fc.(*net.UnixConn), tasks: map[uint64]chan Status{}, done: make(chan struct{})}
	go c.read()
	return c, nil
}

// Pid is the supervisor's process id.
func (c *Client) Pid() int { return c.cmd.Process.Pid }

// Done is closed once the supervisor has exited and every task's status
// channel is closed.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the supervisor exited, once Done is closed: an error
// wrapping ErrExited and cmd.Wait's error (*exec.ExitError for a
// signal or an exit code); nil before.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// read hands each status line to its task until the supervisor closes
// the connection by exiting; then it closes every task's channel.
func (c *Client) read() {
	sc := bufio.NewScanner(c.conn)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		st, ok := parseStatus(sc.Text())
		if !ok {
			continue
		}
		c.mu.Lock()
		ch := c.tasks[st.ID]
		if st.Kind.last() {
			delete(c.tasks, st.ID)
		}
		c.mu.Unlock()
		if ch != nil {
			ch <- st // never blocks: at most started, leftover and a last line
			if st.Kind.last() {
				close(ch)
			}
		}
	}
	_ = c.conn.Close()
	werr := c.cmd.Wait()
	if werr == nil {
		werr = errors.New("exit status 0")
	}
	c.mu.Lock()
	c.err = fmt.Errorf("%w (pid %d): %w", ErrExited, c.cmd.Process.Pid, werr)
	for _, ch := range c.tasks {
		close(ch)
	}
	c.tasks = nil
	c.mu.Unlock()
	close(c.done)
}

// Task is one task sent to the supervisor.
type Task struct {
	// Status delivers the task's lines (KindStarted first, or
	// KindStartFailed) and is closed after its last one, or, without a
	// last one, when the supervisor has exited (Err says why).
	Status <-chan Status
	c      *Client
}

// Err is why Status closed without a last line: the supervisor's exit
// (Client.Err).
func (t *Task) Err() error { return t.c.Err() }

// Start sends r to the supervisor. An error means the request did not
// reach it; the task then never runs. A write that failed part-way
// leaves the connection unusable, so Start then closes it: the
// supervisor kills its tasks and exits, and the next Start fails with
// ErrExited.
func (c *Client) Start(r Request) (*Task, error) {
	c.mu.Lock()
	if c.tasks == nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.next++
	id := c.next
	c.mu.Unlock()
	body, err := r.encode(id)
	if err != nil {
		return nil, err
	}
	ch := make(chan Status, 3)
	c.mu.Lock()
	if c.tasks == nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.tasks[id] = ch
	c.mu.Unlock()
	oob := unix.UnixRights(int(r.Stdout.Fd()), int(r.Stderr.Fd()))
	c.wmu.Lock()
	n, _, err := c.conn.WriteMsgUnix(body, oob, nil)
	if err == nil && n < len(body) {
		_, err = c.conn.Write(body[n:])
	}
	if err != nil {
		_ = c.conn.CloseWrite()
	}
	c.wmu.Unlock()
	runtime.KeepAlive(r.Stdout)
	runtime.KeepAlive(r.Stderr)
	if err != nil {
		c.mu.Lock()
		if c.tasks != nil {
			delete(c.tasks, id)
		}
		c.mu.Unlock()
		return nil, fmt.Errorf("send the task to its supervisor (pid %d): %w", c.Pid(), err)
	}
	return &Task{Status: ch, c: c}, nil
}

// Close closes the connection: the supervisor kills the groups of the
// tasks still running (SIGTERM, SIGKILL after the grace) and exits.
// Close waits for that.
func (c *Client) Close() {
	_ = c.conn.CloseWrite()
	<-c.done
}

package supervisor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// server is the supervisor's state: the tasks it started, by leader pid
// and by id.
type server struct {
	conn    int // ConnFD, blocking
	grace   time.Duration
	devnull int // every task's stdin
	wmu     sync.Mutex

	mu sync.Mutex
	// leaders maps a running leader's pid to its task id, until it is
	// reaped; groups maps a task id to its process group until the task's
	// last line is sent (the leader's group may outlive it).
	leaders  map[int]uint64
	groups   map[uint64]int
	stopping bool          // killAll ran: no new start
	ended    chan struct{} // cap 1: a task's last line was sent
}

func newServer(conn int, grace time.Duration) (*server, error) {
	devnull, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	return &server{conn: conn, grace: grace, devnull: devnull, leaders: map[int]uint64{}, groups: map[uint64]int{},
		ended: make(chan struct{}, 1)}, nil
}

// send writes one status line. A write that fails (the agent is gone)
// is dropped: the connection's end of file stops the supervisor.
func (s *server) send(st Status) {
	b := []byte(st.line())
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for len(b) > 0 {
		n, err := unix.SendmsgN(s.conn, b, nil, nil, unix.MSG_NOSIGNAL)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		b = b[n:]
	}
}

// serve starts the tasks the agent sends until end of file, or until a
// request it cannot read (the stream cannot be resynchronised), which it
// reports on stderr.
func (s *server) serve() {
	for {
		body, fds, err := s.readRequest()
		if err != nil {
			closeFDs(fds)
			if !errors.Is(err, io.EOF) {
				fmt.Fprintln(os.Stderr, "task supervisor: reading a start request:", err)
			}
			return
		}
		s.start(body, fds)
		closeFDs(fds) // the task has its own copies now
	}
}

// readRequest reads one request (Request.encode): the length, with the
// descriptors sent beside it, then the body.
func (s *server) readRequest() (body []byte, fds []int, err error) {
	var hdr [4]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	for got := 0; got < len(hdr); {
		n, oobn, _, _, err := unix.Recvmsg(s.conn, hdr[got:], oob, unix.MSG_CMSG_CLOEXEC)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fds, err
		}
		if oobn > 0 {
			fds = append(fds, rights(oob[:oobn])...)
		}
		if n == 0 {
			if got == 0 {
				return nil, fds, io.EOF
			}
			return nil, fds, io.ErrUnexpectedEOF
		}
		got += n
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > maxRequest {
		return nil, fds, fmt.Errorf("request of %d bytes, more than %d", size, maxRequest)
	}
	body = make([]byte, size)
	for got := 0; got < len(body); {
		n, err := unix.Read(s.conn, body[got:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fds, err
		}
		if n == 0 {
			return nil, fds, io.ErrUnexpectedEOF
		}
		got += n
	}
	return body, fds, nil
}

// rights returns the descriptors of the SCM_RIGHTS messages in oob.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

// start starts one task and reports started or start_failed. fds are its
// stdout and stderr.
func (s *server) start(body []byte, fds []int) {
	r, err := decodeRequest(body)
	failed := func(err error) { s.send(Status{ID: r.id, Kind: KindStartFailed, Text: err.Error()}) }
	switch {
	case err != nil:
		failed(err)
		return
	case len(fds) != 2:
		failed(fmt.Errorf("request %d: %d descriptors sent, want 2 (stdout, stderr)", r.id, len(fds)))
		return
	case r.as != nil && os.Geteuid() != 0:
		failed(fmt.Errorf("uid %d: switching to another user needs root; the supervisor runs as uid %d", r.as.UID, os.Geteuid()))
		return
	}
	path, err := lookPath(r.argv[0], r.env)
	if err != nil {
		failed(err)
		return
	}
	sys := &syscall.SysProcAttr{Setpgid: true}
	attr := &syscall.ProcAttr{Env: r.env, Files: []uintptr{uintptr(s.devnull), uintptr(fds[0]), uintptr(fds[1])}, Sys: sys}
	if as := r.as; as != nil {
		groups := make([]uint32, len(as.Groups))
		for i, g := range as.Groups {
			groups[i] = uint32(g)
		}
		sys.Credential = &syscall.Credential{Uid: uint32(as.UID), Gid: uint32(as.GID), Groups: groups}
		attr.Dir = as.Dir
	}
	// The reaper looks leaders up under mu: held from before the fork
	// until started is sent, a leader that ends at once is reported
	// after it.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		failed(errors.New("the task supervisor is stopping"))
		return
	}
	pid, err := syscall.ForkExec(path, r.argv, attr)
	if err != nil {
		failed(&os.PathError{Op: "fork/exec", Path: path, Err: err})
		return
	}
	s.leaders[pid], s.groups[r.id] = r.id, pid
	s.send(Status{ID: r.id, Kind: KindStarted, N: pid})
}

// lookPath finds file as exec.LookPath does, in the PATH of env (the
// task's environment, not the supervisor's), taking only absolute
// directories: a relative one would depend on the supervisor's working
// directory.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
			break // the first, as getenv reads it
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", file)
}

// reap waits for every child on each SIGCHLD: the tasks' leaders, whose
// ends it reports (end), and the orphans reparented to it as a
// subreaper. It runs until the process exits.
func (s *server) reap(chld <-chan os.Signal) {
	for range chld {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			s.mu.Lock()
			id, leader := s.leaders[pid]
			delete(s.leaders, pid)
			s.mu.Unlock()
			if leader {
				go s.end(id, pid, ws)
			}
		}
	}
}

// end finishes task id whose leader pid ended with ws: it kills what the
// leader left in its group, then reports ws, the task's last line.
func (s *server) end(id uint64, pgid int, ws syscall.WaitStatus) {
	if syscall.Kill(-pgid, 0) == nil {
		s.send(Status{ID: id, Kind: KindLeftover, N: pgid})
		KillGroup(pgid, s.grace, slog.New(slog.DiscardHandler))
	}
	st := Status{ID: id, Kind: KindExited, N: ws.ExitStatus()}
	if ws.Signaled() {
		st = Status{ID: id, Kind: KindSignaled, N: int(ws.Signal())}
	}
	s.mu.Lock()
	delete(s.groups, id)
	s.mu.Unlock()
	s.send(st)
	select {
	case s.ended <- struct{}{}:
	default:
	}
}

// killAll refuses new starts and kills every task's group at once
// (KillGroup: SIGTERM, SIGKILL after the grace); it returns when each
// group is gone or has been sent SIGKILL.
func (s *server) killAll() {
	s.mu.Lock()
	s.stopping = true
	pgids := make([]int, 0, len(s.groups))
	for _, pgid := range s.groups {
		pgids = append(pgids, pgid)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, pgid := range pgids {
		wg.Go(func() { KillGroup(pgid, s.grace, slog.New(slog.DiscardHandler)) })
	}
	wg.Wait()
}

// awaitEnds returns once every task has sent its last line.
func (s *server) awaitEnds() {
	for {
		s.mu.Lock()
		n := len(s.groups)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		<-s.ended
	}
}

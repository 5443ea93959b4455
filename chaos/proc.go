package chaos

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// proc is one vigil process the harness started. Its environment carries
// a private TMPDIR, which its task processes inherit, so stragglers are
// found and killed by pid when it is gone.
type proc struct {
	name   string
	tmp    string
	cmd    *exec.Cmd
	done   chan struct{}
	killed bool
}

// startProc starts bin with args, output appended to logPath, in a clean
// environment (PATH, HOME and its own TMPDIR only).
func startProc(bin, name, logPath, tmp string, args ...string) (*proc, error) {
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + tmp}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, tmp: tmp, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = syscall.Kill(p.pid(), sig)
	}
}

// kill sends SIGKILL and waits until the process is gone (bounded).
func (p *proc) kill() {
	p.killed = true
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)
}

// stop sends SIGTERM (after SIGCONT, in case it is stopped), then SIGKILL
// after grace.
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	if !p.wait(grace) {
		p.kill()
	}
}

func (p *proc) wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// killStragglers kills by pid every live process whose environment holds
// this process's TMPDIR: task processes orphaned by a killed agent.
func (p *proc) killStragglers() {
	mark := []byte("TMPDIR=" + p.tmp + "\x00")
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !(bytes.HasPrefix(env, mark) || bytes.Contains(env, append([]byte{0}, mark...))) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// pidAlive reports whether pid is a live, non-zombie process.
func pidAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := bytes.LastIndex(b, []byte(") ")); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

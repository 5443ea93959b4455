package chaos

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// proc is one vigil process the harness started. Its environment carries
// a private TMPDIR, which its task processes inherit, so stragglers are
// found and killed by pid when it is gone.
type proc struct {
	name string
	role ProcRole
	tmp  string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	// killed: the harness sent SIGKILL (an agent instance's Killed).
	killed bool
	// end is how the harness ended it, set before it signals; empty when
	// the process exits on its own.
	end ProcEnd
}

// startProc starts bin with args, output appended to logPath, in a clean
// environment (PATH, HOME and its own TMPDIR only, plus env); watch reaps
// it.
func startProc(bin string, env []string, name, logPath, tmp string, args ...string) (*proc, error) {
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	out, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + tmp}, env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return &proc{name: name, tmp: tmp, cmd: cmd, done: make(chan struct{})}, nil
}

// watch reaps p in the background and calls onExit once it has exited,
// before anyone waiting for p (kill, stop) wakes up, so its end is
// recorded by then. Call it once, right after startProc.
func (p *proc) watch(onExit func(*proc)) {
	go func() {
		_ = p.cmd.Wait()
		onExit(p)
		close(p.done)
	}()
}

// ending notes how the harness is about to end p (the first reason wins).
func (p *proc) ending(e ProcEnd, kill bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end == "" {
		p.end = e
	}
	p.killed = p.killed || kill
}

// how is how p ended (EndOnItsOwn when the harness did not end it) and
// whether it was sent SIGKILL.
func (p *proc) how() (ProcEnd, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end == "" {
		return EndOnItsOwn, p.killed
	}
	return p.end, p.killed
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

// kill sends SIGKILL and waits until the process is gone (bounded); why
// is recorded as its end.
func (p *proc) kill(why ProcEnd) {
	p.ending(why, true)
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGKILL)
	p.wait(10 * time.Second)
}

// stop sends SIGTERM (after SIGCONT, in case it is stopped), then SIGKILL
// after grace.
func (p *proc) stop(grace time.Duration) {
	p.ending(EndStopped, false)
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	if !p.wait(grace) {
		p.kill(EndStopped)
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
	for _, pid := range pidsWithTmp(func(tmp string) bool { return tmp == p.tmp }) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// pidsWithTmp lists the live processes (this one excepted) whose
// environment's TMPDIR satisfies match.
func pidsWithTmp(match func(tmp string) bool) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if tmp, ok := bytes.CutPrefix(kv, []byte("TMPDIR=")); ok && match(string(tmp)) && pidAlive(pid) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
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

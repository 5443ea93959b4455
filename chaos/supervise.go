package chaos

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vigil-sched/vigil/agent"
)

// procSlot is one position the harness keeps a process in, a replica or
// an agent slot: at most one live process at a time (docs/reliability.md,
// "Supervision"). Its fields are guarded by cluster.procMu.
type procSlot struct {
	proc *proc
	// held: a fault ended the process and will start it again, so the
	// supervisor leaves the slot alone meanwhile.
	held bool
}

// restartBackoff is how long the supervisor waits before it starts again
// a process that exited on its own (systemd's RestartSec, Restart=always).
const restartBackoff = time.Second

var errStopping = errors.New("the cluster is stopping")

// startReplica starts r's `vigil server` (at start-up or ending a fault).
func (c *cluster) startReplica(r *replica) error {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	return c.startReplicaLocked(r, false)
}

func (c *cluster) startReplicaLocked(r *replica, supervised bool) error {
	r.starts++
	name := fmt.Sprintf("server-%s-%d", r.id, r.starts)
	pr := Process{Role: RoleReplica, Slot: r.id, Claim: r.id, Instance: name, Supervised: supervised}
	return c.launch(&r.procSlot, pr, execSpec{bin: c.cfg.VigilBin, args: r.args}, filepath.Join(c.dir, name+".log"),
		func() error { return c.startReplicaLocked(r, true) })
}

// startAgent starts the slot's agent; rename gives it a new name.
func (c *cluster) startAgent(a *agentSlot, rename bool) error {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	return c.startAgentLocked(a, rename, false)
}

// startAgentLocked starts the slot's agent. Its server list starts with
// a different replica per slot, so every replica has agents attached
// first.
func (c *cluster) startAgentLocked(a *agentSlot, rename, supervised bool) error {
	a.starts++
	if rename {
		a.name = fmt.Sprintf("agent-%d-r%d", a.slot, a.starts)
	}
	var servers []string
	for i := range a.links {
		servers = append(servers, "http://"+a.links[(a.slot+i)%len(a.links)].Listen)
	}
	a.instance = fmt.Sprintf("a%d-%d", a.slot, a.starts)
	args := []string{"agent", "--server", strings.Join(servers, ","), "--token", agentToken, "--name", a.name,
		"--capacity", "3", "--log-format", "json",
		"--drain-timeout", "2s", "--kill-grace", c.cfg.Timing.KillGrace.String(),
		"--log-level", "debug"} // its acknowledged heartbeats: the evidence invariant 1 judges by
	if len(a.tags) > 0 {
		args = append(args, "--tags", strings.Join(a.tags, ","))
	}
	pr := Process{Role: RoleAgent, Slot: fmt.Sprintf("agent-%d", a.slot), Claim: a.name, Instance: a.instance, Supervised: supervised}
	spec := execSpec{bin: c.cfg.VigilBin, args: args}
	if a.skew != 0 { // the test build: the shipped one has no clock hook
		spec.bin = c.cfg.HooksBin
		spec.env = []string{agent.EnvTestClockOffset + "=" + a.skew.String()}
	}
	err := c.launch(&a.procSlot, pr, spec, filepath.Join(c.dir, "agent-"+a.instance+".log"),
		func() error { return c.startAgentLocked(a, false, true) })
	if err == nil {
		c.rec.agentStarted(a.instance, a.name, a.skew)
	}
	return err
}

// execSpec is what launch runs: a binary, its arguments and what it adds
// to the clean environment.
type execSpec struct {
	bin  string
	args []string
	env  []string
}

// launch starts pr's process in slot s (procMu held). A process still
// alive in s is killed first and recorded as EndReplaced; if it will not
// die, launch refuses rather than run two. The new process is tracked in
// procs and recorded; restart starts s again (the supervisor's).
func (c *cluster) launch(s *procSlot, pr Process, spec execSpec, logPath string, restart func() error) error {
	if c.stopping {
		return errStopping
	}
	if old := s.proc; old != nil && !old.exited() {
		old.kill(EndReplaced)
		if !old.exited() {
			return fmt.Errorf("%s: previous process %s (pid %d) still alive after kill -9; not starting another",
				pr.Slot, old.name, old.pid())
		}
	}
	p, err := startProc(spec.bin, spec.env, pr.Instance, logPath, filepath.Join(c.dir, "tmp", pr.Instance), spec.args...)
	if err != nil {
		s.held = false
		c.superviseAfter(s, s.proc, restart)
		return err
	}
	p.role = pr.Role
	s.proc, s.held = p, false
	c.procs = append(c.procs, p)
	pr.PID, pr.Started = p.pid(), time.Now()
	c.rec.processStarted(pr)
	p.watch(func(p *proc) { c.exited(p, s, restart) })
	return nil
}

// exited records p's end; when it exited on its own the supervisor starts
// its slot again after restartBackoff.
func (c *cluster) exited(p *proc, s *procSlot, restart func() error) {
	end, killed := p.how()
	c.rec.processEnded(p.pid(), time.Now(), end)
	if p.role == RoleAgent {
		c.rec.agentEnded(p.name, killed)
	}
	if end == EndOnItsOwn {
		c.superviseAfter(s, p, restart)
	}
}

// superviseAfter starts slot s again after restartBackoff, unless by then
// the cluster is stopping, a fault holds s or s runs another process than
// old. A failed start is tried again the same way.
func (c *cluster) superviseAfter(s *procSlot, old *proc, restart func() error) {
	time.AfterFunc(restartBackoff, func() {
		c.procMu.Lock()
		defer c.procMu.Unlock()
		if c.stopping || s.held || s.proc != old {
			return
		}
		if err := restart(); err != nil {
			return // launch scheduled the next try
		}
		if c.restarted != nil {
			c.restarted(s.proc.name)
		}
	})
}

// seize hands s to a fault that ends its process and starts it again (the
// supervisor leaves s alone until then) and returns the process.
func (c *cluster) seize(s *procSlot) *proc {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	s.held = true
	return s.proc
}

// current is s's process, for a fault that signals it.
func (c *cluster) current(s *procSlot) *proc {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	return s.proc
}

// stop ends everything the cluster started: every agent process it ever
// started (and their tasks), every replica process, PostgreSQL, etcd and
// the proxies; last, anything left with a TMPDIR of the harness's is
// killed by pid.
func (c *cluster) stop(ctx context.Context) {
	c.procMu.Lock()
	c.stopping = true
	procs := slices.Clone(c.procs)
	c.procMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	stopAll(procs, RoleAgent, 5*time.Second)
	stopAll(procs, RoleReplica, 10*time.Second)
	if c.pat != nil {
		c.pat.stop()
	}
	c.killTree()
	if c.tox != nil {
		_ = c.tox.Collection.Clear()
	}
	if c.pg != nil {
		_ = c.pg.Stop(ctx)
	}
	c.stopEtcd()
}

// stopAll stops, in parallel, every process of role in procs that is
// still running, then kills what each agent's tasks left.
func stopAll(procs []*proc, role ProcRole, grace time.Duration) {
	var wg sync.WaitGroup
	for _, p := range procs {
		if p.role != role {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !p.exited() {
				p.stop(grace)
			}
			if role == RoleAgent {
				p.killStragglers()
			}
		}()
	}
	wg.Wait()
}

// tmpRoot is the parent of every harness process's TMPDIR.
func (c *cluster) tmpRoot() string { return filepath.Join(c.dir, "tmp") + string(filepath.Separator) }

func (c *cluster) underTmp(tmp string) bool { return strings.HasPrefix(tmp, c.tmpRoot()) }

// killTree kills by pid every process whose TMPDIR is the harness's, until
// none is left (at most 5 s).
func (c *cluster) killTree() {
	for try := 0; try < 50; try++ {
		pids := pidsWithTmp(c.underTmp)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// leftovers describes what the harness started that is still alive after
// stop: a process never reaped, or any process with the harness's TMPDIR.
func (c *cluster) leftovers() []string {
	c.procMu.Lock()
	procs := slices.Clone(c.procs)
	c.procMu.Unlock()
	var out []string
	for _, p := range procs {
		if !p.exited() {
			out = append(out, fmt.Sprintf("%s (pid %d) never exited", p.name, p.pid()))
		}
	}
	for _, pid := range pidsWithTmp(c.underTmp) {
		out = append(out, fmt.Sprintf("pid %d with a TMPDIR under %s still alive", pid, c.tmpRoot()))
	}
	return out
}

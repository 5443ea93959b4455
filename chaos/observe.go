package chaos

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vigil-sched/vigil/leader"
)

// recorder collects the ground truth while the run goes on. Safe for
// concurrent use.
type recorder struct {
	mu      sync.Mutex
	faults  []FaultRecord
	agents  map[string]*AgentInstance
	order   []string
	leaders []LeaderSample
	gone    map[int]time.Time // pid -> when it was seen gone
	procs   []Process         // every harness process, in start order
}

func newRecorder() *recorder {
	return &recorder{agents: map[string]*AgentInstance{}, gone: map[int]time.Time{}}
}

func (r *recorder) fault(f FaultRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, f)
}

func (r *recorder) agentStarted(inst, name string, skew time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.agents[inst] = &AgentInstance{Instance: inst, Name: name, Started: time.Now(), ClockOffset: skew}
	r.order = append(r.order, inst)
}

func (r *recorder) agentEnded(inst string, killed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.agents[inst]; a != nil && a.Ended.IsZero() {
		a.Ended, a.Killed = time.Now(), killed
	}
}

func (r *recorder) processStarted(p Process) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.procs = append(r.procs, p)
}

// processEnded records the end of the harness process pid (pids are not
// reused while the harness has not reaped them, so the last match is it).
func (r *recorder) processEnded(pid int, at time.Time, how ProcEnd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.procs) - 1; i >= 0; i-- {
		if p := &r.procs[i]; p.PID == pid && p.Ended.IsZero() {
			p.Ended, p.End = at, how
			return
		}
	}
}

func (r *recorder) processes() []Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.procs)
}

func (r *recorder) faultCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.faults)
}

// snapshot copies what was recorded into h.
func (r *recorder) snapshot(h *History) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h.Faults = slices.Clone(r.faults)
	slices.SortFunc(h.Faults, func(a, b FaultRecord) int { return a.Start.Compare(b.Start) })
	for _, inst := range r.order {
		h.Agents = append(h.Agents, *r.agents[inst])
	}
	h.Leaders = slices.Clone(r.leaders)
}

var probe = &http.Client{Timeout: 400 * time.Millisecond}

func httpOK(u string) bool {
	resp, err := probe.Get(u)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// scrapeLeader reads vigil_leader and vigil_mass_silence_brake from a
// replica's /metrics.
func scrapeLeader(base string) (leads bool, brake bool, ok bool) {
	resp, err := probe.Get(base + "/metrics")
	if err != nil {
		return false, false, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "vigil_leader "):
			leads = strings.TrimSpace(strings.TrimPrefix(line, "vigil_leader ")) == "1"
		case strings.HasPrefix(line, "vigil_mass_silence_brake "):
			brake = strings.TrimSpace(strings.TrimPrefix(line, "vigil_mass_silence_brake ")) == "1"
		}
	}
	return leads, brake, sc.Err() == nil
}

// sampleLeaders records, every interval until ctx ends, which replicas
// claim to lead (their /metrics) and whom etcd's election names.
func (c *cluster) sampleLeaders(ctx context.Context, every time.Duration) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.clientURLs(), DialTimeout: time.Second,
		Logger: zap.NewNop()}) // etcd restarts are faults here, not news
	if err != nil {
		return
	}
	defer cli.Close()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := LeaderSample{At: time.Now()}
		c.mu.Lock()
		reps := slices.Clone(c.replicas)
		c.mu.Unlock()
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, r := range reps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				leads, brake, ok := scrapeLeader(r.url)
				mu.Lock()
				if ok && leads {
					s.Claiming = append(s.Claiming, r.id)
				}
				if ok && brake {
					s.Braking = append(s.Braking, r.id)
				}
				mu.Unlock()
			}()
		}
		qctx, cancel := context.WithTimeout(ctx, 400*time.Millisecond)
		resp, err := cli.Get(qctx, leader.DefaultEtcdPrefix+"/", clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
		cancel()
		if err == nil {
			s.EtcdOK = true
			if len(resp.Kvs) > 0 {
				s.Etcd = string(resp.Kvs[0].Value)
			}
		}
		wg.Wait()
		slices.Sort(s.Claiming)
		c.rec.mu.Lock()
		c.rec.leaders = append(c.rec.leaders, s)
		c.rec.mu.Unlock()
	}
}

// watchPids notes, every interval, when a journaled task process that
// wrote no end record disappears: the checker's end of a killed execution.
func (c *cluster) watchPids(ctx context.Context, j *journal, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, pid := range j.openPids() {
			if !pidAlive(pid) {
				c.rec.mu.Lock()
				if _, ok := c.rec.gone[pid]; !ok {
					c.rec.gone[pid] = time.Now()
				}
				c.rec.mu.Unlock()
				j.closePid(pid)
			}
		}
	}
}

package main

// Figures the synthetic agents produce: heartbeat ingest and its HOT
// ratio, the no-op burn-down and steady throughput, and the inter-task
// latency of a chain.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/api/protocol"
)

// heartbeats registers HeartbeatAgents agents, plants HeartbeatTIs running
// TIs shared among them, and has each send heartbeats of all its TIs back
// to back for HeartbeatFor, one request in flight per agent. It reports
// TI-heartbeats/s, p50 and p99 per request, and the share of the
// task_instances updates meanwhile that were HOT. The planted work is
// finished afterwards (SQL), so later figures do not carry it.
func (e *env) heartbeats(ctx context.Context, v *vigilProc, conn *pgx.Conn) error {
	e.progress("heartbeat ingest", "tis", e.cfg.HeartbeatTIs, "agents", e.cfg.HeartbeatAgents)
	per := e.cfg.HeartbeatTIs / e.cfg.HeartbeatAgents
	agents := make(map[int64]*agent, e.cfg.HeartbeatAgents)
	ids := make([]int64, 0, e.cfg.HeartbeatAgents)
	for i := 0; i < e.cfg.HeartbeatAgents; i++ {
		a, err := register(ctx, v.ag, fmt.Sprintf("hb-%d", i), []string{heldTag}, per, nil)
		if err != nil {
			return err
		}
		agents[a.id] = a
		ids = append(ids, a.id)
	}
	held, err := plantRunning(ctx, conn, ids, e.cfg.HeartbeatTIs, "0")
	if err != nil {
		return err
	}
	entries := map[int64][]protocol.HeartbeatEntry{}
	for _, h := range held {
		entries[h.AgentID] = append(entries[h.AgentID], protocol.HeartbeatEntry{
			Attempt: protocol.Attempt{TIID: h.TIID, AttemptID: h.AttemptID}, Started: true})
	}
	before, err := readTIStats(ctx, conn)
	if err != nil {
		return err
	}
	lat, sent, took, err := hammer(ctx, agents, entries, e.cfg.HeartbeatFor)
	if err != nil {
		return fmt.Errorf("heartbeat ingest: %w", err)
	}
	e.out.figure("hb_rate", fmt.Sprintf("heartbeat ingest at %d running TIs", e.cfg.HeartbeatTIs),
		float64(sent)/took.Seconds(), "TI-heartbeats/s",
		fmt.Sprintf("%d requests of %d TIs, %d in flight", len(lat), per, e.cfg.HeartbeatAgents))
	e.out.figure("hb_p50", "heartbeat request p50", msf(percentile(lat, 50)), "ms", "")
	e.out.figure("hb_p99", "heartbeat request p99", msf(percentile(lat, 99)), "ms", "")
	if err := e.hotRatio(ctx, conn, before, sent); err != nil {
		return err
	}
	if err := e.pacedHeartbeats(ctx, agents, entries); err != nil {
		return err
	}
	return finishHeld(ctx, conn, agents, ids)
}

// pacedHeartbeats measures the same agents and TIs as real agents load
// the server: each heartbeats all its TIs once per the heartbeat interval
// the server gave it at registration, the agents' phases spread evenly
// over the interval, for three intervals. Back-to-back requests (hammer)
// measure the most the server ingests, and their latency is queueing by
// Little's law (in flight / rate); this is the latency at the rate 100k
// running TIs really offer. It reports the offered and achieved
// TI-heartbeats/s and p50 and p99 per request.
func (e *env) pacedHeartbeats(ctx context.Context, agents map[int64]*agent, entries map[int64][]protocol.HeartbeatEntry) error {
	var interval time.Duration
	for _, a := range agents {
		interval = a.interval
		break
	}
	if interval <= 0 {
		return errors.New("paced heartbeats: the server gave no heartbeat interval")
	}
	window := 3 * interval
	e.progress("paced heartbeats", "interval", interval, "for", window)
	var log requestLog
	var wg sync.WaitGroup
	start := time.Now()
	k := 0
	for id, a := range agents {
		offset := time.Duration(k) * interval / time.Duration(len(agents))
		k++
		wg.Add(1)
		go func() {
			defer wg.Done()
			for at := start.Add(offset); at.Before(start.Add(window)); at = at.Add(interval) {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(at)):
				}
				t := time.Now()
				err := a.heartbeat(ctx, entries[id])
				if !log.record(time.Since(t), len(entries[id]), err) {
					return
				}
			}
		}()
	}
	wg.Wait()
	if log.err != nil {
		return fmt.Errorf("paced heartbeats: %w", log.err)
	}
	var tis int
	for _, es := range entries {
		tis += len(es)
	}
	took := time.Since(start)
	e.out.figure("hb_paced_rate", "heartbeat ingest, paced at the interval", float64(log.sent)/took.Seconds(), "TI-heartbeats/s",
		fmt.Sprintf("%d requests; offered %.0f/s: %d TIs every %s", len(log.lat), float64(tis)/interval.Seconds(), tis, interval))
	e.out.figure("hb_paced_p50", "heartbeat request p50, paced", msf(percentile(log.lat, 50)), "ms", "")
	e.out.figure("hb_paced_p99", "heartbeat request p99, paced", msf(percentile(log.lat, 99)), "ms", "")
	return nil
}

// hammer has every agent send heartbeats of all its entries back to back
// for d, one request in flight per agent, and returns the latencies of
// the requests that completed inside the window, the TI-heartbeats they
// carried, and how long it ran. Any refused request ends it with an error.
func hammer(ctx context.Context, agents map[int64]*agent, entries map[int64][]protocol.HeartbeatEntry, d time.Duration) ([]time.Duration, int64, time.Duration, error) {
	var log requestLog
	var wg sync.WaitGroup
	hctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for id, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for hctx.Err() == nil {
				t := time.Now()
				err := a.heartbeat(hctx, entries[id])
				if hctx.Err() != nil {
					break // cut by the window: not counted
				}
				if !log.record(time.Since(t), len(entries[id]), err) {
					cancel()
					break
				}
			}
		}()
	}
	wg.Wait()
	return log.lat, log.sent, time.Since(start), log.err
}

// requestLog collects, from concurrent senders, the latencies of the
// heartbeat requests that succeeded, the TI-heartbeats they carried, and
// every error.
type requestLog struct {
	mu   sync.Mutex
	lat  []time.Duration
	sent int64
	err  error
}

// record logs one request of tis entries that took d; it reports whether
// the request succeeded.
func (l *requestLog) record(d time.Duration, tis int, err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.err = errors.Join(l.err, err)
		return false
	}
	l.lat = append(l.lat, d)
	l.sent += int64(tis)
	return true
}

// finishHeld ends the heartbeat figure's planted work with SQL (its TIs
// and runs succeed) and deregisters its agents, so that later figures
// carry neither the work nor 100 silent agents.
func finishHeld(ctx context.Context, conn *pgx.Conn, agents map[int64]*agent, ids []int64) error {
	_, err := conn.Exec(ctx, `
		WITH t AS (UPDATE task_instances SET state = 'success', end_date = now(), exit_code = 0, updated_at = now()
		            WHERE agent_id = ANY($1) AND state = 'running' RETURNING run_id)
		UPDATE runs SET state = 'success', end_date = now(), updated_at = now() WHERE id IN (SELECT run_id FROM t)`, ids)
	if err != nil {
		return err
	}
	for _, a := range agents {
		if err := a.deregister(ctx); err != nil {
			return err
		}
	}
	return nil
}

// adoptSeeded registers the seeded live agents through the API, each
// with the running TIs the seed gave it (an agent reconnecting: the id is
// kept, a credential minted), and keeps them heartbeating those TIs until
// the returned stop is called, as real agents would.
func (e *env) adoptSeeded(ctx context.Context, v *vigilProc, conn *pgx.Conn) (stop func(), err error) {
	rows, err := conn.Query(ctx, `
		SELECT a.name, t.id, t.attempt_id::text, t.started_at IS NOT NULL
		  FROM agents a JOIN task_instances t ON t.agent_id = a.id AND t.state = 'running'
		 WHERE a.name LIKE 'seeded-%' ORDER BY a.name, t.id`)
	if err != nil {
		return nil, err
	}
	held := map[string][]protocol.HeartbeatEntry{}
	var name string
	var h protocol.HeartbeatEntry
	_, err = pgx.ForEachRow(rows, []any{&name, &h.TIID, &h.AttemptID, &h.Started}, func() error {
		held[name] = append(held[name], h)
		return nil
	})
	if err != nil {
		return nil, err
	}
	hctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() { cancel(); wg.Wait() }
	for name, entries := range held {
		a, err := register(ctx, v.ag, name, []string{seededTag}, maxCapacity, entries)
		if err != nil {
			stop()
			return nil, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); a.heartbeatLoop(hctx) }()
	}
	return stop, nil
}

// hotRatio waits until the statistics count the heartbeats' updates
// (backends flush their counters within about 10 s of going idle), then
// reports the HOT share of task_instances updates since before.
func (e *env) hotRatio(ctx context.Context, conn *pgx.Conn, before tableStats, want int64) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		after, err := readTIStats(ctx, conn)
		if err != nil {
			return err
		}
		upd, hot := after.Upd-before.Upd, after.HotUpd-before.HotUpd
		if upd >= want || time.Now().After(deadline) {
			ratio := 0.0
			if upd > 0 {
				ratio = float64(hot) / float64(upd)
			}
			e.out.figure("hot", "heartbeat HOT ratio (task_instances)", ratio, "",
				fmt.Sprintf("n_tup_hot_upd/n_tup_upd = %d/%d over the ingest", hot, upd))
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// fleet is the synthetic agents working the throughput DAGs.
type fleet struct {
	agents   []*agent
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
	stopErr  error
}

// completers is how many completion batches each synthetic agent has in
// flight at most (one batch per claim).
const completers = 4

// startFleet registers Agents synthetic agents offering benchTag and sets
// them working.
func (e *env) startFleet(ctx context.Context, v *vigilProc) (*fleet, error) {
	f := &fleet{done: make(chan error, e.cfg.Agents)}
	for i := 0; i < e.cfg.Agents; i++ {
		a, err := register(ctx, v.ag, fmt.Sprintf("synthetic-%d", i), []string{benchTag}, e.cfg.Capacity, nil)
		if err != nil {
			return nil, err
		}
		a.slots.Window = e.cfg.ClaimWindow
		f.agents = append(f.agents, a)
	}
	wctx, cancel := context.WithCancel(ctx)
	f.cancel = cancel
	for _, a := range f.agents {
		go func() { f.done <- a.work(wctx, completers) }()
	}
	return f, nil
}

// completed is the number of completions the fleet had accepted.
func (f *fleet) completed() int64 {
	var n int64
	for _, a := range f.agents {
		n += a.completed.Load()
	}
	return n
}

// claimRounds sums the agents' claims that returned TIs, the slots they
// asked for and the TIs they got.
func (f *fleet) claimRounds() (claims, asked, got int64) {
	for _, a := range f.agents {
		claims, asked, got = claims+a.claims.Load(), asked+a.asked.Load(), got+a.got.Load()
	}
	return claims, asked, got
}

// reportRounds prints the TIs per claim round since the counts before.
func (e *env) reportRounds(f *fleet, label string, before [3]int64) [3]int64 {
	c, a, g := f.claimRounds()
	now := [3]int64{c, a, g}
	c, a, g = c-before[0], a-before[1], g-before[2]
	if c == 0 {
		e.out.missing(label, "no claim returned TIs")
		return now
	}
	e.out.figure("", label, float64(g)/float64(c), "TIs",
		fmt.Sprintf("%d claims, %.1f slots asked each, claim window %s", c, float64(a)/float64(c), e.cfg.ClaimWindow))
	return now
}

// failed returns an agent's error if one stopped early.
func (f *fleet) failed() error {
	select {
	case err := <-f.done:
		if err == nil {
			err = errors.New("a synthetic agent stopped")
		}
		return err
	default:
		return nil
	}
}

// stop stops the fleet and deregisters its agents; later calls return
// the first call's error.
func (f *fleet) stop(ctx context.Context) error {
	f.stopOnce.Do(func() {
		f.cancel()
		var errs []error
		for range f.agents {
			errs = append(errs, <-f.done)
		}
		for _, a := range f.agents {
			errs = append(errs, a.deregister(ctx))
		}
		f.stopErr = errors.Join(errs...)
	})
	return f.stopErr
}

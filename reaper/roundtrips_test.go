package reaper_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/chaos"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// TestSweepRoundTripsBoundTheChaosStretch counts the database round trips
// of a sweep that reaps two silent agents' three attempts each (the chaos
// cluster's capacity), on a store whose connections have prepared
// nothing yet, with the clock read from the database as the leader's is.
// The chaos checker stretches the agent-lost SLA under a slow database by
// two such sweeps' round trips (chaos.SweepRoundTrips, slowSweepStretch):
// a sweep that grows past the constant must raise it, or the checker would
// call a slow database's honest delay a violation.
func TestSweepRoundTripsBoundTheChaosStretch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply(wideDAG)
	runID := e.trigger("wide")
	for _, name := range []string{"w1", "w2"} {
		agent := e.register(name, nil, 3)
		tasks := e.claim(agent, 3)
		require.Len(t, tasks, 3)
		e.started(agent, tasks...)
	}
	e.ageHeartbeat("run_id = $1", time.Hour, runID)

	// A fresh store: every statement of the sweep is prepared on first use.
	proxy := newTripCounter(t, e.url)
	st, err := store.Open(e.ctx, proxy.url)
	require.NoError(t, err)
	t.Cleanup(st.Close)
	reapers := e.reapersOn(st, offsetClock{st: st, ahead: time.Minute})
	before := proxy.trips.Load()
	rep, err := reapers.Sweep(e.ctx, e.oldTerm())
	trips := proxy.trips.Load() - before
	require.NoError(t, err)
	require.Empty(t, rep.Errors)
	applied := 0
	for _, c := range rep.Candidates {
		if c.Applied && c.Reaper == state.ReaperAgentLost {
			applied++
		}
	}
	require.Equal(t, 6, applied, "the sweep reaps all six attempts")
	t.Logf("a reaping sweep on cold connections: %d round trips (chaos.SweepRoundTrips = %d)", trips, chaos.SweepRoundTrips)
	require.LessOrEqual(t, trips, int64(chaos.SweepRoundTrips))
	require.Greater(t, trips, int64(chaos.SweepRoundTrips)/2,
		"the constant is at most twice the count: a loose bound lets a slow reaper pass the SLA")
}

const wideDAG = `
dag_id: wide
tasks:
  - {id: t1, command: ["true"]}
  - {id: t2, command: ["true"]}
  - {id: t3, command: ["true"]}
  - {id: t4, command: ["true"]}
  - {id: t5, command: ["true"]}
  - {id: t6, command: ["true"]}
`

// offsetClock reads the database clock, as the leader's reapers do, a
// fixed step ahead so that a test need not wait out a threshold.
type offsetClock struct {
	st interface {
		Now(context.Context) (time.Time, error)
	}
	ahead time.Duration
}

func (c offsetClock) Now(ctx context.Context) (time.Time, error) {
	now, err := c.st.Now(ctx)
	return now.Add(c.ahead), err
}

// tripCounter is a TCP proxy in front of PostgreSQL that counts the
// frontend messages that end a round trip: Sync (the end of an extended
// query or a pipelined batch) and Query (a simple query). pgx waits for
// the reply to each.
type tripCounter struct {
	url   string
	trips atomic.Int64
}

func newTripCounter(t *testing.T, dbURL string) *tripCounter {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	u.Host = ln.Addr().String()
	p := &tripCounter{url: u.String()}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(client, server); _ = client.Close() }()
			go func() { defer wg.Done(); p.forward(client, server); _ = server.Close() }()
		}
	}()
	return p
}

// forward copies the frontend's messages to the server: first the
// startup message (a length and a body, no type byte), then typed
// messages, counting each Sync and Query.
func (p *tripCounter) forward(client, server net.Conn) {
	var hdr [5]byte
	if _, err := io.ReadFull(client, hdr[:4]); err != nil {
		return
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if err := copyMsg(server, client, hdr[:4], int64(n)-4); err != nil {
		return
	}
	for {
		if _, err := io.ReadFull(client, hdr[:]); err != nil {
			return
		}
		if hdr[0] == 'S' || hdr[0] == 'Q' {
			p.trips.Add(1)
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if err := copyMsg(server, client, hdr[:], int64(n)-4); err != nil {
			return
		}
	}
}

func copyMsg(dst io.Writer, src io.Reader, hdr []byte, body int64) error {
	if body < 0 {
		return fmt.Errorf("bad message length %d", body)
	}
	if _, err := dst.Write(hdr); err != nil {
		return err
	}
	_, err := io.CopyN(dst, src, body)
	return err
}

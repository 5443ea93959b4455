package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/agent/supervisor"
)

func TestNewAppliesDefaults(t *testing.T) {
	t.Parallel()
	a, err := New(Config{Servers: []string{"http://127.0.0.1:8080/"}})
	require.NoError(t, err)
	c := a.cfg
	assert.Equal(t, []string{"http://127.0.0.1:8080"}, c.Servers)
	assert.Equal(t, DefaultCapacity, c.Capacity)
	assert.Equal(t, DefaultDrainTimeout, c.DrainTimeout)
	assert.Equal(t, DefaultClaimWait, c.ClaimWait)
	assert.Equal(t, DefaultClaimWindow, c.ClaimWindow)
	assert.Equal(t, DefaultClaimWindow, a.slots.Window, "the claim loop waits by Config")
	assert.Equal(t, DefaultCapacity, a.slots.Capacity)
	assert.Equal(t, DefaultCapacity, a.slots.Free(), "nothing running")
	assert.Equal(t, DefaultEventBufferSize, c.EventBufferSize)
	assert.Equal(t, DefaultLogBufferSize, c.LogBufferSize)
	assert.Equal(t, DefaultKillGrace, c.KillGrace)
	assert.NotEmpty(t, c.Name)
	assert.NotNil(t, c.HTTPClient)
	assert.Equal(t, 15*time.Second, a.interval(), "until the server says otherwise")
	// The test binary has no vigil-supervise beside it: it stands in for
	// a lone vigil binary.
	self, err := os.Executable()
	require.NoError(t, err)
	assert.Equal(t, self, c.SupervisorPath)
	assert.Equal(t, []string{supervisor.Subcommand}, c.SupervisorArgs)
}

// TestDefaultSupervisorPrefersTheSiblingBinary lays out real files the
// way an install does: vigil-supervise beside vigil is used when this
// process may execute it, and vigil's own __supervise otherwise.
func TestDefaultSupervisorPrefersTheSiblingBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := filepath.Join(dir, "vigil")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	sibling := filepath.Join(dir, supervisor.ProgramName)
	fallback := func() {
		t.Helper()
		path, args := defaultSupervisor(exe)
		assert.Equal(t, exe, path)
		assert.Equal(t, []string{supervisor.Subcommand}, args)
	}

	fallback() // absent
	require.NoError(t, os.Mkdir(sibling, 0o755))
	fallback() // a directory
	require.NoError(t, os.Remove(sibling))
	require.NoError(t, os.WriteFile(sibling, []byte("#!/bin/sh\n"), 0o644))
	fallback() // not executable (root too: access(2) wants some x bit)
	require.NoError(t, os.Chmod(sibling, 0o755))
	path, args := defaultSupervisor(exe)
	assert.Equal(t, sibling, path, "an executable sibling wins")
	assert.Nil(t, args)

	// A symlink to an executable counts; a dangling one does not.
	other := t.TempDir()
	link := filepath.Join(other, "vigil")
	require.NoError(t, os.WriteFile(link, nil, 0o755))
	require.NoError(t, os.Symlink(sibling, filepath.Join(other, supervisor.ProgramName)))
	path, _ = defaultSupervisor(link)
	assert.Equal(t, filepath.Join(other, supervisor.ProgramName), path)
	require.NoError(t, os.Remove(sibling))
	path, args = defaultSupervisor(link)
	assert.Equal(t, link, path, "dangling symlink")
	assert.Equal(t, []string{supervisor.Subcommand}, args)

	// An explicit SupervisorPath wins, with its own leading arguments.
	a, err := New(Config{Servers: []string{"http://a:1"}, SupervisorPath: "/opt/vigil/bin/vigil", SupervisorArgs: []string{supervisor.Subcommand}})
	require.NoError(t, err)
	assert.Equal(t, "/opt/vigil/bin/vigil", a.cfg.SupervisorPath)
	assert.Equal(t, []string{supervisor.Subcommand}, a.cfg.SupervisorArgs)
}

func TestNewRejectsInvalidConfigNamingTheField(t *testing.T) {
	t.Parallel()
	ok := []string{"http://a:1"}
	cases := map[string]Config{
		"Servers":           {},
		"Servers[1]":        {Servers: []string{"http://a:1", "ftp://b"}},
		"Tags[1]":           {Servers: ok, Tags: []string{"a", "a"}},
		"Tags[0]":           {Servers: ok, Tags: []string{strings.Repeat("t", 65)}},
		"Tags":              {Servers: ok, Tags: manyTags(65)},
		"Capacity":          {Servers: ok, Capacity: -1},
		"Token":             {Servers: ok, Token: "abc\ndef"},
		"DrainTimeout":      {Servers: ok, DrainTimeout: -time.Second},
		"ClaimWait":         {Servers: ok, ClaimWait: time.Minute},
		"ClaimWindow":       {Servers: ok, ClaimWindow: 2 * time.Second},
		"HeartbeatInterval": {Servers: ok, HeartbeatInterval: -1},
		"KillGrace":         {Servers: ok, KillGrace: -1},
		"EventBufferSize":   {Servers: ok, EventBufferSize: -5},
		"LogBufferSize":     {Servers: ok, LogBufferSize: -5},
		"SupervisorArgs":    {Servers: ok, SupervisorArgs: []string{"__supervise"}},
	}
	for field, cfg := range cases {
		_, err := New(cfg)
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), field+" ")
	}
	full := manyTags(64)
	full[0] = strings.Repeat("t", 64)
	_, err := New(Config{Servers: ok, Tags: full})
	require.NoError(t, err, "64 tags, one of 64 bytes: the bounds themselves are allowed")
	_, err = New(Config{Servers: ok, ClaimWindow: -time.Millisecond})
	require.ErrorContains(t, err, "ClaimWindow must not be negative (ClaimWindowOff turns the window off)")
}

// TestClaimWindowOffReachesTheClaimLoop: ClaimWindowOff is kept (not
// replaced by the default), and SlotWait treats it as no window.
func TestClaimWindowOffReachesTheClaimLoop(t *testing.T) {
	t.Parallel()
	a, err := New(Config{Servers: []string{"http://a:1"}, ClaimWindow: ClaimWindowOff})
	require.NoError(t, err)
	assert.Equal(t, ClaimWindowOff, a.slots.Window)
}

func TestGapMarkerText(t *testing.T) {
	t.Parallel()
	assert.Equal(t,
		"--- control plane unreachable for 45s: replaying 12 buffered events and 238 log lines (0 dropped) ---",
		gapMarker(44600*time.Millisecond, 12, 238, 0))
	assert.Equal(t,
		"--- control plane unreachable for 120s: replaying 0 buffered events and 5 log lines (2847 dropped) ---",
		gapMarker(2*time.Minute, 0, 5, 2847))
}

// manyTags returns n distinct tags.
func manyTags(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tag-%d", i)
	}
	return out
}

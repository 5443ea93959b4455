package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	assert.Equal(t, DefaultEventBufferSize, c.EventBufferSize)
	assert.Equal(t, DefaultLogBufferSize, c.LogBufferSize)
	assert.Equal(t, DefaultKillGrace, c.KillGrace)
	assert.NotEmpty(t, c.Name)
	assert.NotNil(t, c.HTTPClient)
	assert.Equal(t, 15*time.Second, a.interval(), "until the server says otherwise")
}

func TestNewRejectsInvalidConfigNamingTheField(t *testing.T) {
	t.Parallel()
	ok := []string{"http://a:1"}
	cases := map[string]Config{
		"Servers":           {},
		"Servers[1]":        {Servers: []string{"http://a:1", "ftp://b"}},
		"Tags[1]":           {Servers: ok, Tags: []string{"a", "a"}},
		"Capacity":          {Servers: ok, Capacity: -1},
		"Token":             {Servers: ok, Token: "abc\ndef"},
		"DrainTimeout":      {Servers: ok, DrainTimeout: -time.Second},
		"ClaimWait":         {Servers: ok, ClaimWait: time.Minute},
		"HeartbeatInterval": {Servers: ok, HeartbeatInterval: -1},
		"KillGrace":         {Servers: ok, KillGrace: -1},
		"EventBufferSize":   {Servers: ok, EventBufferSize: -5},
		"LogBufferSize":     {Servers: ok, LogBufferSize: -5},
	}
	for field, cfg := range cases {
		_, err := New(cfg)
		require.Error(t, err, field)
		assert.Contains(t, err.Error(), field+" ")
	}
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

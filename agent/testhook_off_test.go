//go:build !vigil_testhooks

package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shipped build reads no clock offset from the environment: with
// EnvTestClockOffset set, the agent's wall clock is the
// machine's. Not parallel: it sets the environment.
func TestShippedBuildIgnoresTheClockOffsetEnvironment(t *testing.T) {
	t.Setenv(EnvTestClockOffset, "5m")
	a, err := New(Config{Servers: []string{"http://127.0.0.1:1"}, Token: fakeToken, Name: "shipped", SupervisorPath: supervisorBin})
	require.NoError(t, err)
	assert.Zero(t, a.clockOffset)
	assert.WithinDuration(t, time.Now(), a.wallNow(), time.Second)
}

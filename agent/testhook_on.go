//go:build vigil_testhooks

package agent

import (
	"fmt"
	"os"
	"time"
)

// clockOffsetFromEnv reads EnvTestClockOffset (a Go duration,
// "-4m" for a clock behind), in a vigil built with -tags vigil_testhooks
// (testhook.Tag) for the tests only: the agent's wall clock (wallNow) is
// that far off.
func clockOffsetFromEnv() (time.Duration, error) {
	v := os.Getenv(EnvTestClockOffset)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q (environment, test hook): must be a Go duration such as 5m or -4m30s", EnvTestClockOffset, v)
	}
	return d, nil
}

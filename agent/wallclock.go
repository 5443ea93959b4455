package agent

import "time"

// wallNow is the agent's wall clock, the one reading the agent sends: the
// time of each log line and gap marker (protocol.LogLine.Time), which the
// control plane stores and shows and decides nothing by (docs/design.md
// §4 logs; every decision reads the database clock). Durations and
// deadlines use the monotonic clock and never this offset.
//
// clockOffset is zero but in a vigil built with the vigil_testhooks tag
// (EnvTestClockOffset), where the chaos suite runs agents whose wall
// clock is minutes off (docs/reliability.md).
func (a *Agent) wallNow() time.Time { return a.wallAt(time.Now()) }

// wallAt is the agent's wall clock at the instant t of the machine's
// (t itself, monotonic reading and all, in the shipped build).
func (a *Agent) wallAt(t time.Time) time.Time { return t.Add(a.clockOffset) }

// EnvTestClockOffset names the environment variable that, in a vigil
// built with the vigil_testhooks tag (internal/testhook.Tag), offsets a
// `vigil agent`'s wall clock by its value (a Go duration): the chaos
// suite's skewed agents. Go reads the clock through the vDSO, so faketime
// cannot do it. The shipped build ignores it (testhook_off.go).
const EnvTestClockOffset = "VIGIL_TESTHOOK_AGENT_CLOCK_OFFSET"

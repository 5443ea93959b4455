package scheduler

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/reaper/reapertest"
	"github.com/vigil-sched/vigil/state"
)

// A term's group holds every service, each under its own name: the
// scheduler's three passes, the stall detector, settings, ti_counts, one
// per reaper, and retention only when some category is kept for a
// limited time.
func TestTermGroupHoldsEveryService(t *testing.T) {
	t.Parallel()
	want := []string{ServiceTick, ServiceReconcile, ServiceSchedules, ServiceStall, ServiceSettings, ServiceTICounts}
	for _, r := range state.Reapers() {
		want = append(want, string(r))
	}
	for _, c := range []struct {
		retention Retention
		pruning   bool
	}{{Retention{}, false}, {Retention{Runs: DefaultRetentionRuns}, true}} {
		s, _ := newScheduler(t, Config{Retention: c.retention})
		stall := newStallDetector(stallConfig{Epoch: 1, GapLimit: s.gapLimit(), Clock: reapertest.NewClock(time.Time{}),
			SetTerm: func(*reaper.Term) {}}, slog.New(slog.DiscardHandler))
		g, unsub := s.services(1, stall)
		for _, name := range want {
			if assert.NotNil(t, g.Service(name), name) {
				assert.Equal(t, name, g.Service(name).Name())
			}
		}
		assert.Equal(t, c.pruning, g.Service(ServiceRetention) != nil, "retention %+v", c.retention)
		unsub()
	}
}

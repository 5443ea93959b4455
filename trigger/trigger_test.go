package trigger

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/vigil-sched/vigil/state"
)

// up builds Counts from upstream states, one letter each: s success,
// k skipped, f failed, c cancelled, u upstream_failed, p pending (running).
func up(states string) Counts {
	var c Counts
	for _, r := range states {
		c.Add(map[rune]state.TI{'s': state.TISuccess, 'k': state.TISkipped, 'f': state.TIFailed,
			'c': state.TICancelled, 'u': state.TIUpstreamFailed, 'p': state.TIRunning}[r])
	}
	return c
}

// Each rule's decision for upstream mixes that reach each of its
// outcomes, after Airflow's trigger_rule_dep: what waits, what runs, and
// what is decided early, without waiting for the pending upstreams.
func TestDecide(t *testing.T) {
	for _, c := range []struct {
		rule  Rule
		up    string
		want  Decision
		label string
	}{
		{AllSuccess, "", Run, "no upstream"},
		{AllSuccess, "ss", Run, "all succeeded"},
		{AllSuccess, "sp", Wait, "one pending"},
		{AllSuccess, "fp", UpstreamFailed, "a failure decides at once"},
		{AllSuccess, "cs", UpstreamFailed, "a cancel counts as a failure"},
		{AllSuccess, "up", UpstreamFailed, "upstream_failed propagates"},
		{AllSuccess, "kp", Skip, "a skip propagates at once"},
		{AllSuccess, "kf", UpstreamFailed, "a failure outranks a skip"},

		{AllFailed, "ff", Run, "all failed"},
		{AllFailed, "fu", Run, "upstream_failed counts as failed"},
		{AllFailed, "fp", Wait, "one pending"},
		{AllFailed, "fs", Skip, "a success can never fail"},
		{AllFailed, "kp", Skip, "a skip decides at once"},

		{AllDone, "sfku", Run, "every end counts"},
		{AllDone, "fp", Wait, "one pending"},
		{AllDone, "", Run, "no upstream"},

		{AllSkipped, "kk", Run, "all skipped"},
		{AllSkipped, "kp", Wait, "one pending"},
		{AllSkipped, "sp", Skip, "a success decides at once"},
		{AllSkipped, "fp", Skip, "a failure decides at once"},
		{AllSkipped, "up", Skip, "upstream_failed decides at once"},

		{OneSuccess, "sp", Run, "the first success runs it"},
		{OneSuccess, "fp", Wait, "a success may still come"},
		{OneSuccess, "kk", Skip, "all skipped"},
		{OneSuccess, "fk", UpstreamFailed, "all done without a success"},
		{OneSuccess, "uu", UpstreamFailed, "all upstream_failed"},

		{OneFailed, "fp", Run, "the first failure runs it"},
		{OneFailed, "up", Run, "upstream_failed counts"},
		{OneFailed, "cs", Run, "a cancel counts"},
		{OneFailed, "sp", Wait, "a failure may still come"},
		{OneFailed, "sk", Skip, "all done without a failure"},

		{OneDone, "sp", Run, "a success runs it"},
		{OneDone, "fp", Run, "a failure runs it"},
		{OneDone, "kp", Wait, "a skip is not done for one_done"},
		{OneDone, "up", Wait, "nor is upstream_failed"},
		{OneDone, "ku", Skip, "all done without a success or failure"},

		{NoneFailed, "sk", Run, "skipped is fine"},
		{NoneFailed, "kk", Run, "all skipped still runs"},
		{NoneFailed, "sp", Wait, "one pending"},
		{NoneFailed, "fp", UpstreamFailed, "a failure decides at once"},
		{NoneFailed, "up", UpstreamFailed, "upstream_failed decides at once"},

		{NoneFailedMinOneSuccess, "sk", Run, "one success, the rest skipped"},
		{NoneFailedMinOneSuccess, "kp", Wait, "a success may still come"},
		{NoneFailedMinOneSuccess, "kk", Skip, "all skipped"},
		{NoneFailedMinOneSuccess, "fp", UpstreamFailed, "a failure decides at once"},
		{NoneFailedMinOneSuccess, "kf", UpstreamFailed, "a failure outranks all-skipped"},

		{NoneSkipped, "sf", Run, "success and failure both fine"},
		{NoneSkipped, "uf", Run, "upstream_failed is fine"},
		{NoneSkipped, "sp", Wait, "one pending"},
		{NoneSkipped, "kp", Skip, "a skip decides at once"},

		{Always, "pp", Run, "runs without waiting"},
		{Always, "fk", Run, "whatever happened"},
		{Always, "", Run, "no upstream"},

		{"bogus", "kp", Skip, "an unknown rule is all_success"},
	} {
		assert.Equal(t, c.want, Decide(c.rule, up(c.up)), "%s over %q: %s", c.rule, c.up, c.label)
	}
}

// every enumerates the Counts of up to 2 upstreams of each kind.
func every(f func(Counts)) {
	for s := range 3 {
		for k := range 3 {
			for fl := range 3 {
				for u := range 3 {
					for p := range 3 {
						f(Counts{Upstream: s + k + fl + u + p, Success: s, Skipped: k, Failed: fl, UpstreamFailed: u})
					}
				}
			}
		}
	}
}

// Every rule decides once its upstreams are all done, and runs a TI
// without upstreams: no TI can wait forever in none.
func TestDecideNeverWaitsWhenAllAreDone(t *testing.T) {
	for _, r := range Rules() {
		every(func(c Counts) {
			if c.Done() == c.Upstream {
				assert.NotEqual(t, Wait, Decide(r, c), "%s %+v", r, c)
			}
		})
		assert.Equal(t, Run, Decide(r, Counts{}), "%s without upstreams", r)
	}
}

// The SQL scheduler looks decisions up by Seen: that is faithful only if
// no count matters beyond which kinds occur.
func TestDecideDependsOnlyOnSeen(t *testing.T) {
	for _, r := range Rules() {
		table := Table(r)
		every(func(c Counts) {
			assert.Equal(t, Decide(r, c), table[c.Seen()], "%s %+v (seen %05b)", r, c, c.Seen())
		})
	}
}

func TestSeenRoundTrips(t *testing.T) {
	for i := range SeenCombinations {
		assert.Equal(t, Seen(i), Seen(i).Counts().Seen(), "%05b", i)
	}
}

// Counts.Add and StateSeen classify every TI state alike.
func TestAddAgreesWithStateSeen(t *testing.T) {
	for _, s := range state.TIStates() {
		var c Counts
		c.Add(s)
		assert.Equal(t, StateSeen(s), c.Seen(), "%s", s)
		assert.Equal(t, s.Terminal(), c.Done() == 1, "%s: done iff terminal", s)
	}
}

func TestRules(t *testing.T) {
	assert.Len(t, Rules(), 11)
	for _, r := range Rules() {
		assert.True(t, r.Valid(), "%s", r)
	}
	assert.False(t, Rule("").Valid())
	assert.False(t, Rule("all_sucess").Valid())
	assert.Equal(t, AllSuccess, Default)
	assert.Equal(t, state.TISkipped, Skip.State())
	assert.Equal(t, state.TIUpstreamFailed, UpstreamFailed.State())
	assert.Equal(t, state.TI(""), Run.State())
	assert.Equal(t, fmt.Sprint([]Decision{Wait, Run, Skip, UpstreamFailed}), fmt.Sprint(Decisions()))
}

package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestQueuedFits: a queue notification concerns a waiting agent when one
// of its tag sets is a subset of the agent's tags; an empty or unreadable
// payload, or tags not yet known, concern every agent.
func TestQueuedFits(t *testing.T) {
	t.Parallel()
	gpu := []string{"gpu", "linux"}
	none := []string{}
	for _, c := range []struct {
		payload string
		tags    *[]string
		want    bool
	}{
		{`[["gpu"]]`, &gpu, true},
		{`[["gpu"]]`, &none, false},
		{`[[]]`, &none, true},
		{`[["arm"],["linux","gpu"]]`, &gpu, true},
		{`[["arm"],["linux","cuda"]]`, &gpu, false},
		{``, &none, true},
		{`not json`, &none, true},
		{`[["gpu"]]`, nil, true},
	} {
		assert.Equal(t, c.want, queuedFits(c.payload, c.tags), "payload %q", c.payload)
	}
}

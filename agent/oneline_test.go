package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A claim logs its command on one line, bounded.
func TestOneLine(t *testing.T) {
	assert.Equal(t, `sh -c echo a\necho b\tc`, oneLine([]string{"sh", "-c", "echo a\necho b\tc"}, 200))
	long := oneLine([]string{"sh", "-c", strings.Repeat("x", 500)}, 50)
	assert.Len(t, []rune(long), 50)
	assert.True(t, strings.HasSuffix(long, "…"))
	assert.NotContains(t, long, "\n")
}

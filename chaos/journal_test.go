package chaos

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.log")
	require.NoError(t, os.WriteFile(path, []byte(
		"S a1 7 3 c1 1 100 a0-1 1000000000\n"+
			"S a2 8 3 c2 2 101 a1-2 2000000000\n"+
			"E a1 100 0 16 9000000000\n"), 0o644))
	ex, err := parseJournal(path, map[int]time.Time{101: time.Unix(5, 0)})
	require.NoError(t, err)
	require.Len(t, ex, 2)
	assert.Equal(t, Execution{AttemptID: "a1", TIID: 7, RunID: 3, TaskID: "c1", Try: 1, PID: 100, Instance: "a0-1",
		Start: time.Unix(1, 0), End: time.Unix(9, 0), Printed: 16}, ex[0])
	assert.False(t, ex[1].HasEnd())
	assert.Equal(t, time.Unix(5, 0), ex[1].Gone)

	require.NoError(t, os.WriteFile(path, []byte("E zz 1 0 1 1\n"), 0o644))
	_, err = parseJournal(path, nil)
	assert.ErrorContains(t, err, "without a start")
	require.NoError(t, os.WriteFile(path, []byte("garbage\n"), 0o644))
	_, err = parseJournal(path, nil)
	assert.ErrorContains(t, err, ":1: not a journal record")
}

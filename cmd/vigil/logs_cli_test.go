package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

func fakeLogLine(id int64, stream, text string) protocol.StoredLogLine {
	return protocol.StoredLogLine{
		ID: id, TryNumber: 1, Seq: id, Stream: stream, Line: text,
		Time: time.Date(2026, 11, 21, 10, 0, 0, 123_000_000, time.UTC).Add(time.Duration(id) * time.Second),
	}
}

func TestLogs(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("GET /v1/runs/12/tasks/extract/logs", http.StatusOK, protocol.LogList{
		Lines:   []protocol.StoredLogLine{fakeLogLine(1, "stdout", "hello"), fakeLogLine(2, "system", "log gap: 3 lines lost")},
		TIState: "running",
	})
	r := runCLI(t, append([]string{"logs", "12", "extract", "--try", "2"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "2026-11-21T10:00:01.123Z [stdout] hello\n2026-11-21T10:00:02.123Z [system] log gap: 3 lines lost\n", r.stdout)
	assert.Equal(t, []string{"GET /v1/runs/12/tasks/extract/logs?try=2"}, f.requestLog(), "no follow: one request")

	r = runCLI(t, append([]string{"logs", "12", "extract", "-o", "json"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, "one JSON object per line")
	var l protocol.StoredLogLine
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &l))
	assert.Equal(t, "system", l.Stream)
}

func TestLogsFollow(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.sequence("GET /v1/runs/12/tasks/extract/logs",
		protocol.LogList{Lines: []protocol.StoredLogLine{fakeLogLine(1, "stdout", "a"), fakeLogLine(2, "stderr", "b")}, TIState: "running"},
		protocol.LogList{Lines: []protocol.StoredLogLine{}, TIState: "running"},
		protocol.LogList{Lines: []protocol.StoredLogLine{fakeLogLine(5, "stdout", "c")}, TIState: "success", Terminal: true},
		protocol.LogList{Lines: []protocol.StoredLogLine{fakeLogLine(6, "stdout", "late")}, TIState: "success", Terminal: true},
		protocol.LogList{Lines: []protocol.StoredLogLine{}, TIState: "success", Terminal: true},
	)
	r := runCLI(t, append([]string{"logs", "12", "extract", "--follow"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, []string{
		"2026-11-21T10:00:01.123Z [stdout] a",
		"2026-11-21T10:00:02.123Z [stderr] b",
		"2026-11-21T10:00:05.123Z [stdout] c",
		"2026-11-21T10:00:06.123Z [stdout] late",
	}, strings.Split(strings.TrimSpace(r.stdout), "\n"), "lines shipped just after the end are still shown")
	reqs := f.requestLog()
	require.GreaterOrEqual(t, len(reqs), 5)
	assert.Equal(t, []string{
		"GET /v1/runs/12/tasks/extract/logs",
		"GET /v1/runs/12/tasks/extract/logs?after=2&after_try=1",
		"GET /v1/runs/12/tasks/extract/logs?after=2&after_try=1",
		"GET /v1/runs/12/tasks/extract/logs?after=5&after_try=1",
	}, reqs[:4], "the cursor is the last line's try and seq")
	for _, r := range reqs[4:] {
		assert.Equal(t, "GET /v1/runs/12/tasks/extract/logs?after=6&after_try=1", r)
	}
	assert.LessOrEqual(t, len(reqs), 7, "stops soon after the task is terminal and drained")
}

func TestLogsNotFound(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("GET /v1/runs/12/tasks/nope/logs", http.StatusNotFound,
		protocol.ErrorBody{Error: protocol.ErrorDetail{Code: protocol.CodeNotFound, Message: `run 12 task "nope": not found`}})
	r := runCLI(t, append([]string{"logs", "12", "nope", "--follow"}, f.serverArgs()...)...)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.err.Error(), `run 12 task "nope": not found (HTTP 404)`)
}

func TestLogsBadTry(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	r := runCLI(t, append([]string{"logs", "12", "extract", "--try", "-1"}, f.serverArgs()...)...)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.err.Error(), "--try")
}

// TestLogsCursorIsTheSeq: ids say nothing about order (a replayed line may
// have a higher id than the one after it); the next read continues after
// the last line's try and seq. A log that lost lines ends with a warning,
// and its gap marker says how many were lost there.
func TestLogsCursorIsTheSeq(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	first, marker := fakeLogLine(9, "stdout", "one"), fakeLogLine(3, "system", "--- gap ---")
	first.Seq, marker.Seq, marker.Dropped = 1, 2, 40
	f.sequence("GET /v1/runs/12/tasks/extract/logs",
		protocol.LogList{Lines: []protocol.StoredLogLine{first, marker}, TIState: "success", Terminal: true, LogDropped: 40},
		protocol.LogList{Lines: []protocol.StoredLogLine{}, TIState: "success", Terminal: true, LogDropped: 40},
	)
	r := runCLI(t, append([]string{"logs", "12", "extract", "--follow"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, []string{
		"2026-11-21T10:00:09.123Z [stdout] one",
		"2026-11-21T10:00:03.123Z [system] --- gap --- [40 lines of this try lost here]",
		"log incomplete: 40 line(s) were lost (see the gap markers above)",
	}, strings.Split(strings.TrimSpace(r.stdout), "\n"))
	reqs := f.requestLog()
	require.GreaterOrEqual(t, len(reqs), 2)
	assert.Equal(t, "GET /v1/runs/12/tasks/extract/logs?after=2&after_try=1", reqs[1], "after the last line's seq, not its id")
}

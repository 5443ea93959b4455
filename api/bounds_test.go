package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api"
	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/internal/testlog"
)

// countingBody is a request body of n bytes of an endless JSON string
// (`{"token":"aaaa…`), which counts what the server read of it.
type countingBody struct {
	n, read int
}

func (b *countingBody) Read(p []byte) (int, error) {
	const head = `{"token":"`
	if b.read >= b.n {
		return 0, io.EOF
	}
	k := min(len(p), b.n-b.read)
	for i := range k {
		if j := b.read + i; j < len(head) {
			p[i] = head[j]
		} else {
			p[i] = 'a'
		}
	}
	b.read += k
	return k, nil
}

// An unauthenticated route reads at most 16 KiB of body: a declared 10 MB
// body is refused with 413 before a byte of it is read, and an undeclared
// (chunked) one is cut at the bound.
func TestOpenRouteRefusesALargeBodyUnread(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	send := func(declared bool) (*httptest.ResponseRecorder, *countingBody) {
		body := &countingBody{n: 10 << 20}
		req := httptest.NewRequest("POST", "/v1/session", body)
		req.ContentLength = -1
		if declared {
			req.ContentLength = int64(body.n)
		}
		rec := httptest.NewRecorder()
		h.srv.Config.Handler.ServeHTTP(rec, req)
		return rec, body
	}

	rec, body := send(true)
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	assert.Zero(t, body.read, "a body declared over the bound is not read at all")
	assert.Contains(t, rec.Body.String(), protocol.CodeTooLarge)
	assert.Equal(t, "close", rec.Header().Get("Connection"))

	rec, body = send(false)
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, rec.Body.String())
	assert.LessOrEqual(t, body.read, 16<<10+1, "the server reads at most the bound (and one byte to see it is over)")

	// A sign-in within the bound still works.
	cookie, _ := h.signIn(opToken)
	assert.NotNil(t, cookie)
}

// A log line longer than 64 KiB, whoever sent it, is stored truncated to
// 64 KiB with a marker saying how much was dropped, and counted.
func TestLongLogLineIsStoredTruncated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(wideDAG("longline", 1, ""))
	agent := h.register("longliner", nil, 1)
	runID := h.trigger("longline")
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool { tasks = h.claim(agent, 1, time.Second); return len(tasks) == 1 },
		10*time.Second, 10*time.Millisecond)

	huge := "é" + strings.Repeat("x", 5<<20) // 5 MB, starting with a 2-byte rune
	lines := []protocol.LogLine{
		{Attempt: tasks[0].Attempt, Seq: 1, Stream: protocol.StreamStdout, Time: time.Now(), Line: huge},
		{Attempt: tasks[0].Attempt, Seq: 2, Stream: protocol.StreamStdout, Time: time.Now(), Line: "short"},
	}
	code, e := h.call("POST", fmt.Sprintf("/v1/agents/%d/logs", agent), agentToken, protocol.LogsRequest{Lines: lines}, nil)
	require.Equal(t, http.StatusNoContent, code, e.Message)

	var got protocol.LogList
	code, e = h.call("GET", fmt.Sprintf("/v1/runs/%d/tasks/%s/logs", runID, tasks[0].TaskID), opToken, nil, &got)
	require.Equal(t, http.StatusOK, code, e.Message)
	require.Len(t, got.Lines, 2)
	stored := got.Lines[0].Line
	assert.LessOrEqual(t, len(stored), api.MaxLogLine)
	assert.Greater(t, len(stored), api.MaxLogLine-100, "the line keeps all it can")
	assert.True(t, strings.HasPrefix(stored, "éxxx"), "the line's start is kept")
	assert.Regexp(t, `x \[vigil: line truncated by the server, \d+ bytes dropped\]$`, stored)
	assert.Equal(t, "short", got.Lines[1].Line)
	assert.Equal(t, 1.0, testutil.ToFloat64(h.metrics.LogLinesTruncated))
}

// A 5xx reply says nothing of the cause but a request id, which is also
// on the reply's header; a parameter the database cannot hold is a 400
// naming it, not a driver error.
func TestInternalErrorsAreGeneric(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	h.applyDAG(wideDAG("generic", 1, ""))
	runID := h.trigger("generic")

	code, e := h.call("GET", fmt.Sprintf("/v1/runs/%d/tasks/t000/logs?try=99999999999", runID), opToken, nil, nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, `query parameter try: "99999999999" must be an integer in 0..2147483647`, e.Message)

	// A real internal error: the table the route reads is gone.
	conn, err := pgx.Connect(context.Background(), h.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), `ALTER TABLE agents RENAME TO agents_gone`)
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(context.Background(), `ALTER TABLE agents_gone RENAME TO agents`) }()

	req, err := http.NewRequest("GET", h.srv.URL+"/v1/agents", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+opToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var eb protocol.ErrorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&eb))
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	assert.Equal(t, protocol.CodeInternal, eb.Error.Code)
	assert.Equal(t, "internal error; the server log has the detail under this request id", eb.Error.Message)
	assert.NotEmpty(t, eb.Error.RequestID)
	assert.Equal(t, resp.Header.Get(protocol.HeaderRequestID), eb.Error.RequestID)
}

// The API's HTTP server cuts off a client that sends its request too
// slowly, and its timeouts outlast the claim long-poll.
func TestHTTPServerTimeouts(t *testing.T) {
	t.Parallel()
	def := api.DefaultTimeouts()
	assert.Greater(t, def.Write, api.MaxClaimWait, "a claim long-poll must finish within the write timeout")
	assert.Positive(t, def.ReadHeader)
	assert.Positive(t, def.Read)
	assert.Positive(t, def.Idle)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := api.NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}), api.Timeouts{ReadHeader: time.Second, Read: 300 * time.Millisecond, Write: time.Second, Idle: time.Second})
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	// Headers promising 100 bytes, then 10 of them, then nothing.
	_, err = fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
	require.NoError(t, err)
	// The server gives up on the body and closes the connection (ReadAll
	// ends at EOF without error); the deadline only bounds the test should
	// it never do so, and then ReadAll fails with a timeout.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	_, err = io.ReadAll(conn)
	assert.NoError(t, err, "the server must close a connection whose body does not come within its read timeout")
}

// An agent registers with at most 64 tags of at most 64 bytes; past
// either bound the register is a 400 naming the field.
func TestAgentTagsAreBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	tags := func(n, size int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%0*d", size, i)
		}
		return out
	}
	reg := func(name string, tags []string) (int, protocol.ErrorDetail) {
		return h.call("POST", "/v1/agents/register", agentToken, protocol.RegisterRequest{Name: name, Tags: tags, Capacity: 1}, nil)
	}
	code, e := reg("many", tags(protocol.MaxAgentTags+1, 4))
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "tags: 65 tags, more than the 64 an agent may have", e.Message)
	long := tags(3, 4)
	long[2] = strings.Repeat("x", protocol.MaxTagLen+1)
	code, e = reg("long", long)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, "tags[2]: 65 bytes, more than the 64 a tag may have", e.Message)
	code, e = reg("full", tags(protocol.MaxAgentTags, protocol.MaxTagLen))
	assert.Equal(t, http.StatusOK, code, e.Message)
}

// Sign-in is throttled per client address: the burst of attempts, then
// 429 rate_limited with Retry-After. Every refused authentication is
// logged without the token and counted by method.
func TestSignInThrottledAndFailuresLoggedAndCounted(t *testing.T) {
	t.Parallel()
	var logs testlog.Buffer
	// One attempt an hour after the burst: no refill within the test.
	limit := api.SignInLimit{Burst: 5, Every: time.Hour}
	h := newHarness(t, harnessOpts{noScheduler: true, logs: &logs, signIn: limit})
	const guess = "guessed-token-0123456789"
	post := func(token string) *http.Response {
		b, _ := json.Marshal(protocol.SessionRequest{Token: token})
		resp, err := http.Post(h.srv.URL+"/v1/session", "application/json", strings.NewReader(string(b)))
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	for i := range limit.Burst {
		require.Equal(t, http.StatusUnauthorized, post(guess).StatusCode, "attempt %d", i+1)
	}
	resp := post(opToken) // even the right token waits its turn
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.InDelta(t, 3600, retry, 60, "seconds until the bucket has an attempt again")

	code, _ := h.call("GET", "/v1/runs", guess, nil, nil)
	assert.Equal(t, http.StatusUnauthorized, code)
	failures := func(method string) float64 {
		return testutil.ToFloat64(h.metrics.AuthFailures.WithLabelValues(method))
	}
	assert.Equal(t, float64(limit.Burst), failures("sign_in"))
	assert.Equal(t, 1.0, failures("rate_limited"))
	assert.Equal(t, 1.0, failures("bearer"))

	out := logs.String()
	assert.Equal(t, limit.Burst+2, strings.Count(out, `"msg":"authentication failed"`), out)
	assert.Contains(t, out, `"method":"rate_limited"`)
	assert.NotContains(t, out, guess, "a refused token is never logged")
	assert.NotContains(t, out, opToken)
}

// GET /v1/agents is paged: newest first, limit per page, next_cursor to
// the next page and null on the last; an over-large limit is a 400
// naming it.
func TestAgentsListIsPaged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noScheduler: true})
	var ids []int64
	for i := range 5 {
		ids = append(ids, h.register(fmt.Sprintf("paged-%d", i), nil, 1))
	}
	var got []int64
	path := "/v1/agents?limit=2"
	pages := 0
	for {
		var page protocol.AgentList
		code, e := h.call("GET", path, opToken, nil, &page)
		require.Equal(t, http.StatusOK, code, e.Message)
		pages++
		assert.LessOrEqual(t, len(page.Agents), 2)
		for _, a := range page.Agents {
			got = append(got, a.ID)
		}
		if page.NextCursor == nil {
			break
		}
		path = fmt.Sprintf("/v1/agents?limit=2&before=%d", *page.NextCursor)
	}
	assert.Equal(t, 3, pages)
	assert.Equal(t, []int64{ids[4], ids[3], ids[2], ids[1], ids[0]}, got, "every agent once, newest first")

	var first protocol.AgentList
	code, _ := h.call("GET", "/v1/agents", opToken, nil, &first)
	require.Equal(t, http.StatusOK, code)
	assert.Len(t, first.Agents, 5, "the default page holds them all")
	assert.Nil(t, first.NextCursor)

	code, e := h.call("GET", fmt.Sprintf("/v1/agents?limit=%d", protocol.AgentsPageMax+1), opToken, nil, nil)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, `query parameter limit: "501" must be an integer in 1..500`, e.Message)
}

// A log read is bounded in bytes as well as lines: 100 lines of 60 KiB
// come in pages of at most 4 MiB plus one line, each but the last saying
// more follow, and reading on after each page's last line gives every
// line once, in order.
func TestLogReadIsBoundedInBytes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.applyDAG(wideDAG("biglog", 1, ""))
	agent := h.register("biglogger", nil, 1)
	runID := h.trigger("biglog")
	var tasks []protocol.ClaimedTask
	require.Eventually(t, func() bool { tasks = h.claim(agent, 1, time.Second); return len(tasks) == 1 },
		10*time.Second, 10*time.Millisecond)
	const n, size = 100, 60 << 10
	var lines []protocol.LogLine
	for i := 1; i <= n; i++ {
		lines = append(lines, protocol.LogLine{Attempt: tasks[0].Attempt, Seq: int64(i), Stream: protocol.StreamStdout,
			Time: time.Now(), Line: fmt.Sprintf("%03d", i) + strings.Repeat("x", size-3)})
	}
	code, e := h.call("POST", fmt.Sprintf("/v1/agents/%d/logs", agent), agentToken, protocol.LogsRequest{Lines: lines}, nil)
	require.Equal(t, http.StatusNoContent, code, e.Message)

	var seqs []int64
	after, pages := int64(0), 0
	for {
		var page protocol.LogList
		code, e := h.call("GET", fmt.Sprintf("/v1/runs/%d/tasks/%s/logs?try=1&after=%d", runID, tasks[0].TaskID, after), opToken, nil, &page)
		require.Equal(t, http.StatusOK, code, e.Message)
		pages++
		bytes := 0
		for _, l := range page.Lines {
			bytes += len(l.Line)
			seqs = append(seqs, l.Seq)
		}
		assert.LessOrEqual(t, bytes, 4<<20+size, "page %d", pages)
		if !page.More {
			break
		}
		require.NotEmpty(t, page.Lines)
		after = page.Lines[len(page.Lines)-1].Seq
	}
	assert.Equal(t, 2, pages, "6 MB in pages of 4 MiB")
	require.Len(t, seqs, n)
	for i, s := range seqs {
		assert.Equal(t, int64(i+1), s)
	}
}

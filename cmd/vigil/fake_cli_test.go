package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
)

// fakeToken is the operator token the fake API accepts.
const fakeToken = "op-token"

// fakeAPI is an httptest fake of the operator API for CLI unit tests:
// tests register handlers on mux; every request is authenticated like the
// real server and recorded. Real-server tests live elsewhere.
type fakeAPI struct {
	*httptest.Server
	mux *http.ServeMux

	mu       sync.Mutex
	requests []string // "METHOD /escaped/path?query"
	auth     []string // Authorization header of each request
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{mux: http.NewServeMux()}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		req := r.Method + " " + r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			req += "?" + r.URL.RawQuery
		}
		f.requests = append(f.requests, req)
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+fakeToken {
			fakeError(w, http.StatusUnauthorized, protocol.CodeUnauthorized, "invalid bearer token")
			return
		}
		f.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// requestLog returns the requests seen so far.
func (f *fakeAPI) requestLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

// authLog returns the Authorization headers seen so far.
func (f *fakeAPI) authLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.auth...)
}

// reply registers a handler that always answers code with v.
func (f *fakeAPI) reply(pattern string, code int, v any) {
	f.mux.HandleFunc(pattern, func(w http.ResponseWriter, _ *http.Request) { fakeJSON(w, code, v) })
}

// sequence registers a handler answering 200 with each of vs in turn,
// repeating the last one.
func (f *fakeAPI) sequence(pattern string, vs ...any) {
	var mu sync.Mutex
	i := 0
	f.mux.HandleFunc(pattern, func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		v := vs[min(i, len(vs)-1)]
		i++
		mu.Unlock()
		if e, ok := v.(fakeErr); ok {
			fakeError(w, e.status, e.code, e.msg)
			return
		}
		fakeJSON(w, http.StatusOK, v)
	})
}

// fakeErr, in a sequence, is answered as an error reply.
type fakeErr struct {
	status    int
	code, msg string
}

func fakeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func fakeError(w http.ResponseWriter, code int, errCode, msg string) {
	fakeJSON(w, code, protocol.ErrorBody{Error: protocol.ErrorDetail{Code: errCode, Message: msg}})
}

// cliResult is the outcome of one CLI invocation.
type cliResult struct {
	stdout, stderr string
	err            error
	code           int
}

// runCLI runs the root command with args, as main does minus os.Exit.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	return runCLIWithStdin(t, nil, args...)
}

// runCLIWithStdin is runCLI with stdin (nil: the process's).
func runCLIWithStdin(t *testing.T, stdin io.Reader, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := newRootCmd()
	root.SetArgs(args)
	if stdin != nil {
		root.SetIn(stdin)
	}
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := execute(ctx, root)
	return cliResult{stdout: out.String(), stderr: errOut.String(), err: err, code: exitCode(err)}
}

// serverArgs are the client flags pointing at f.
func (f *fakeAPI) serverArgs() []string {
	return []string{"--server", f.URL, "--token", fakeToken}
}

func ptrTo[T any](v T) *T { return &v }

// cliTime is a fixed UTC time, minutes after 10:00 on 2026-11-21.
func cliTime(minutes int) time.Time {
	return time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC).Add(time.Duration(minutes) * time.Minute)
}

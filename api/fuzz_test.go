package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/reaper"
)

// Fuzz targets for every request decoder of the API: the strict
// JSON decoder and the validation each handler applies before it touches
// the store. `go test` runs their seeds; `make fuzz` runs each for longer.
// Each checks that nothing panics, that a rejected body gets a 400
// bad_request naming the request body, and the handler's invariants on
// what it accepts.

// fuzzDecode runs decode on body into a T, as a handler does, and checks
// the reply it writes: none on success, a 400 ErrorBody otherwise.
func fuzzDecode[T any](t *testing.T, body []byte) (T, bool) {
	t.Helper()
	var v T
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	if decode(w, r, &v) {
		if w.Body.Len() != 0 {
			t.Fatalf("decode accepted %q but wrote %q", body, w.Body.String())
		}
		return v, true
	}
	if w.Code != http.StatusBadRequest {
		t.Fatalf("decode rejected %q with HTTP %d, want 400", body, w.Code)
	}
	var eb protocol.ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil {
		t.Fatalf("error reply for %q is not an ErrorBody: %v: %q", body, err, w.Body.String())
	}
	if eb.Error.Code != protocol.CodeBadRequest || !strings.HasPrefix(eb.Error.Message, "request body: ") {
		t.Fatalf("error reply for %q: %+v, want bad_request naming the request body", body, eb.Error)
	}
	return v, false
}

const fuzzUUID = "7b0a3c1e-9f0e-4c43-8f5e-9a0d3c6b1e2f"

// addSeeds adds bodies every decoder should survive, then the given ones.
func addSeeds(f *testing.F, bodies ...string) {
	for _, b := range append([]string{
		``, `{}`, `null`, `[]`, `"x"`, `{} {}`, `{}x`, `{"unknown":1}`, `{`, `{"a":`, "\x00", `{"ti_id":1e400}`,
	}, bodies...) {
		f.Add([]byte(b))
	}
}

func FuzzDecodeRegister(f *testing.F) {
	addSeeds(f,
		`{"name":"a","tags":["gpu"],"capacity":4,"in_flight":[]}`,
		`{"name":"a","capacity":1,"in_flight":[{"ti_id":1,"attempt_id":"`+fuzzUUID+`","started":true}]}`,
		`{"name":"","capacity":0}`, `{"name":"a","capacity":99999}`, `{"name":"a","capacity":1,"tags":[""]}`,
		`{"name":"a","capacity":1,"in_flight":[{"ti_id":-1,"attempt_id":"nope"}]}`)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ok := fuzzDecode[protocol.RegisterRequest](t, body)
		if !ok || validateRegister(req) != nil {
			return
		}
		if req.Name == "" || len(req.Name) > maxNameLen || req.Capacity < 1 || req.Capacity > maxCapacity {
			t.Fatalf("accepted an out-of-range registration: %+v", req)
		}
		reg := fromRegister(req)
		if len(reg.InFlight) != len(req.InFlight) {
			t.Fatalf("in_flight lost entries: %d → %d", len(req.InFlight), len(reg.InFlight))
		}
	})
}

func FuzzDecodeClaim(f *testing.F) {
	addSeeds(f, `{"slots":1,"wait":"5s"}`, `{"slots":-1}`, `{"slots":1,"wait":"5m"}`, `{"wait":30000000000}`,
		`{"wait":"-1s"}`, `{"wait":"1y"}`, `{"wait":9223372036854775807}`)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ok := fuzzDecode[protocol.ClaimRequest](t, body)
		if !ok || validateClaim(req) != nil {
			return
		}
		if req.Slots < 0 || req.Slots > maxCapacity || req.Wait.D() < 0 || req.Wait.D() > MaxClaimWait {
			t.Fatalf("accepted an out-of-range claim: %+v", req)
		}
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	addSeeds(f, `{"entries":[]}`, `{"entries":[{"ti_id":1,"attempt_id":"`+fuzzUUID+`","started":true}]}`,
		`{"entries":[{"ti_id":0,"attempt_id":"`+fuzzUUID+`"}]}`, `{"entries":[{"ti_id":1,"attempt_id":"x","started":"yes"}]}`)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ok := fuzzDecode[protocol.HeartbeatRequest](t, body)
		if !ok || validateHeartbeat(req) != nil {
			return
		}
		for _, e := range fromHeartbeatEntries(req.Entries) {
			if e.TIID <= 0 {
				t.Fatalf("accepted a non-positive ti_id: %+v", e)
			}
		}
	})
}

func FuzzDecodeComplete(f *testing.F) {
	addSeeds(f, `{"ti_id":1,"attempt_id":"`+fuzzUUID+`","outcome":"success","exit_code":0}`,
		`{"ti_id":1,"attempt_id":"`+fuzzUUID+`","outcome":"failed","exit_code":-1,"error":"boom"}`,
		`{"ti_id":1,"attempt_id":"`+fuzzUUID+`","outcome":"maybe"}`, `{"ti_id":1,"attempt_id":"`+fuzzUUID+`","exit_code":1.5}`)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ok := fuzzDecode[protocol.CompleteRequest](t, body)
		if !ok || validateAttempt("attempt", req.Attempt) != nil {
			return
		}
		if !knownOutcome(req.Outcome) {
			return
		}
		if c := fromComplete(req); c.TIID != req.TIID || c.Outcome == "" {
			t.Fatalf("completion not carried over: %+v from %+v", c, req)
		}
	})
}

func FuzzDecodeLogs(f *testing.F) {
	addSeeds(f,
		`{"lines":[{"ti_id":1,"attempt_id":"`+fuzzUUID+`","seq":1,"stream":"stdout","time":"2026-11-23T10:00:00Z","line":"hi"}]}`,
		`{"lines":[{"ti_id":1,"attempt_id":"`+fuzzUUID+`","seq":1,"stream":"stderr","time":"2026-11-23T10:00:00Z","line":"\u0000\ud800"}]}`,
		`{"lines":[{"ti_id":1,"attempt_id":"`+fuzzUUID+`","seq":0,"stream":"stdout","time":"2026-11-23T10:00:00Z"}]}`,
		`{"lines":[{"ti_id":1,"attempt_id":"`+fuzzUUID+`","seq":1,"stream":"video","time":"2026-11-23T10:00:00Z"}]}`,
		`{"lines":[{"ti_id":1,"attempt_id":"`+fuzzUUID+`","seq":1,"stream":"stdout","time":"yesterday"}]}`)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ok := fuzzDecode[protocol.LogsRequest](t, body)
		if !ok {
			return
		}
		if _, err := validateLogs(&req); err != nil {
			return
		}
		for _, l := range fromLogLines(req.Lines) {
			if !utf8.ValidString(l.Line) || strings.ContainsRune(l.Line, 0) {
				t.Fatalf("accepted a line PostgreSQL cannot store: %q", l.Line)
			}
			if len(l.Line) > MaxLogLine {
				t.Fatalf("accepted a line of %d bytes, over MaxLogLine", len(l.Line))
			}
			if l.Seq <= 0 || l.Time.IsZero() {
				t.Fatalf("accepted an invalid line: %+v", l)
			}
		}
	})
}

func FuzzDecodeThresholds(f *testing.F) {
	addSeeds(f, `{"agent_lost":"90s"}`, `{"agent_lost":"1s","dispatch_lost":"3m","orphan":"5m"}`,
		`{"orphan":-5}`, `{"dispatch_lost":"forever"}`, `{"agent_lost":1000000000}`)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ok := fuzzDecode[protocol.ThresholdsUpdate](t, body)
		if !ok {
			return
		}
		th := reaper.DefaultThresholds()
		for _, p := range []struct {
			in  *protocol.Duration
			out *time.Duration
		}{{req.AgentLost, &th.AgentLost}, {req.DispatchLost, &th.DispatchLost}, {req.Orphan, &th.Orphan}} {
			if p.in != nil {
				if p.in.D() < 0 {
					t.Fatalf("decoded a negative duration: %s", p.in.D())
				}
				*p.out = *durPtr(p.in)
			}
		}
		_ = th.Validate(15 * time.Second) // must not panic; the error names the field
	})
}

func FuzzDecodeApplyDAG(f *testing.F) {
	addSeeds(f, `{"yaml":"dag_id: x\ntasks:\n  - id: a\n    command: [\"true\"]\n"}`, `{"yaml":""}`,
		`{"yaml":"dag_id: x\ntasks:\n  - id: a\n    command: []\n"}`, `{"yaml":"{{{"}`, `{"yaml":5}`)
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ok := fuzzDecode[protocol.ApplyDAGRequest](t, body)
		if !ok {
			return
		}
		if spec, err := dag.Parse([]byte(req.YAML)); err == nil && spec.DAGID == "" {
			t.Fatalf("accepted a DAG without dag_id from %q", req.YAML)
		}
	})
}

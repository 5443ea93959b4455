package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

// bodyRecorder answers pattern with code and v and keeps each request body.
type bodyRecorder struct {
	mu     sync.Mutex
	bodies []string
}

func (b *bodyRecorder) register(f *fakeAPI, pattern string, code int, v any) {
	f.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.bodies = append(b.bodies, string(raw))
		b.mu.Unlock()
		if e, ok := v.(fakeErr); ok {
			fakeError(w, e.status, e.code, e.msg)
			return
		}
		fakeJSON(w, code, v)
	})
}

func (b *bodyRecorder) last() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.bodies) == 0 {
		return ""
	}
	return b.bodies[len(b.bodies)-1]
}

func TestDagsBackfill(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	from, to := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	rec := &bodyRecorder{}
	rec.register(f, "POST /v1/dags/etl/backfill", http.StatusOK, protocol.BackfillResponse{DAGID: "etl", From: from, To: to,
		Slots: 3, Created: 2, Existing: 1, RunIDs: []int64{7, 8}})
	args := func(extra ...string) []string {
		return append(append([]string{"dags", "backfill", "etl"}, extra...), f.serverArgs()...)
	}

	r := runCLI(t, args("--from", "2026-01-01T00:00:00Z", "--to", "2026-01-03T01:00:00+01:00")...)
	require.NoError(t, r.err)
	assert.Equal(t, "dag etl backfill ["+fmtTime(from)+", "+fmtTime(to)+"]: 3 slots, 2 runs created, 1 already existed\n", r.stdout)
	assert.JSONEq(t, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-03T01:00:00+01:00"}`, rec.last())

	r = runCLI(t, args("--from", "2026-01-01T00:00:00Z", "--to", "2026-01-03T00:00:00Z", "-o", "name")...)
	require.NoError(t, r.err)
	assert.Equal(t, "7\n8\n", r.stdout, "-o name: the created runs")
	r = runCLI(t, args("--from", "2026-01-01T00:00:00Z", "--to", "2026-01-03T00:00:00Z", "-o", "json")...)
	require.NoError(t, r.err)
	var res protocol.BackfillResponse
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, 1, res.Existing)

	sent := len(f.requestLog())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--to", "2026-01-03T00:00:00Z"}, "--from is required"},
		{[]string{"--from", "2026-01-01T00:00:00Z"}, "--to is required"},
		{[]string{"--from", "2026-01-01", "--to", "2026-01-03T00:00:00Z"}, `--from "2026-01-01": not an RFC 3339 time`},
		{[]string{"--from", "2026-01-04T00:00:00Z", "--to", "2026-01-03T00:00:00Z"}, "--from 2026-01-04T00:00:00Z is after --to"},
	} {
		r := runCLI(t, args(c.args...)...)
		assert.Equal(t, exitUsage, r.code, "%v", c.args)
		require.Error(t, r.err)
		assert.Contains(t, r.err.Error(), c.want)
	}
	assert.Len(t, f.requestLog(), sent, "bad flags send nothing")
}

func TestDagsBackfillServerErrors(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("POST /v1/dags/etl/backfill", http.StatusBadRequest, protocol.ErrorBody{Error: protocol.ErrorDetail{
		Code: protocol.CodeBadRequest, Message: `backfill of dag "etl": to: 2030-01-01T00:00:00Z is in the future`}})
	f.reply("POST /v1/dags/adhoc/backfill", http.StatusConflict, protocol.ErrorBody{Error: protocol.ErrorDetail{
		Code: protocol.CodeConflict, Message: `dag "adhoc" has no schedule`}})
	r := runCLI(t, append([]string{"dags", "backfill", "etl", "--from", "2026-01-01T00:00:00Z", "--to", "2030-01-01T00:00:00Z"},
		f.serverArgs()...)...)
	assert.Equal(t, exitUsage, r.code, "a rejected range is bad input")
	assert.Contains(t, r.err.Error(), "backfill rejected: backfill of dag \"etl\": to: 2030-01-01T00:00:00Z is in the future (HTTP 400)")
	r = runCLI(t, append([]string{"dags", "backfill", "adhoc", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z"},
		f.serverArgs()...)...)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.err.Error(), "has no schedule")
}

func TestRunsTriggerConf(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	rec := &bodyRecorder{}
	rec.register(f, "POST /v1/dags/pipeline/runs", http.StatusCreated, fakeQueuedRun())
	trigger := func(extra ...string) cliResult {
		return runCLI(t, append(append([]string{"runs", "trigger", "pipeline"}, extra...), f.serverArgs()...)...)
	}

	r := trigger("--conf", "region=us", "--conf", "expr=a=b")
	require.NoError(t, r.err)
	assert.JSONEq(t, `{"conf":{"region":"us","expr":"a=b"}}`, rec.last(), "values are strings; the first = splits")

	dir := t.TempDir()
	yamlFile := filepath.Join(dir, "params.yaml")
	require.NoError(t, os.WriteFile(yamlFile, []byte("region: us\nlimit: 500\ndry_run: true\n"), 0o644))
	r = trigger("--conf-file", yamlFile)
	require.NoError(t, r.err)
	assert.JSONEq(t, `{"conf":{"region":"us","limit":500,"dry_run":true}}`, rec.last())
	jsonFile := filepath.Join(dir, "params.json")
	require.NoError(t, os.WriteFile(jsonFile, []byte(`{"ratio": 0.5}`), 0o644))
	r = trigger("--conf-file", jsonFile)
	require.NoError(t, r.err)
	assert.JSONEq(t, `{"conf":{"ratio":0.5}}`, rec.last())

	r = trigger()
	require.NoError(t, r.err)
	assert.Empty(t, rec.last(), "no conf, no body")

	sent := len(f.requestLog())
	listFile := filepath.Join(dir, "list.yaml")
	require.NoError(t, os.WriteFile(listFile, []byte("- a\n- b\n"), 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--conf", "a=1", "--conf-file", yamlFile}, "--conf and --conf-file are exclusive"},
		{[]string{"--conf", "novalue"}, `--conf "novalue": must be key=value`},
		{[]string{"--conf", "=x"}, `--conf "=x": must be key=value`},
		{[]string{"--conf", "a=1", "--conf", "a=2"}, `key "a" is given twice`},
		{[]string{"--conf-file", filepath.Join(dir, "missing.yaml")}, "--conf-file: open "},
		{[]string{"--conf-file", listFile}, "--conf-file " + listFile + ": want a JSON or YAML mapping"},
	} {
		r := trigger(c.args...)
		assert.Equal(t, exitUsage, r.code, "%v", c.args)
		require.Error(t, r.err)
		assert.Contains(t, r.err.Error(), c.want)
	}
	assert.Len(t, f.requestLog(), sent, "bad flags send nothing")
}

func TestRunsTriggerConfRejectedExits2(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	msg := `dag "pipeline": conf key "limt": unknown param: the DAG declares limit, region`
	f.reply("POST /v1/dags/pipeline/runs", http.StatusBadRequest, protocol.ErrorBody{Error: protocol.ErrorDetail{
		Code: protocol.CodeBadRequest, Message: msg}})
	r := runCLI(t, append([]string{"runs", "trigger", "pipeline", "--conf", "limt=1"}, f.serverArgs()...)...)
	assert.Equal(t, exitUsage, r.code)
	assert.Equal(t, "conf rejected: "+msg+" (HTTP 400)", r.err.Error())
}

func TestRunsShowPrintsOriginAndConf(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	d := fakeRunDetail("success", fakeTI("extract", "success"))
	from, to := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	d.RunType, d.LogicalDate, d.DataIntervalStart, d.DataIntervalEnd = "backfill", &from, &from, &to
	d.Conf = map[string]any{"region": "eu", "limit": float64(1000000), "dry_run": true}
	f.reply("GET /v1/runs/12", http.StatusOK, d)
	r := runCLI(t, append([]string{"runs", "show", "12"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Regexp(t, `(?m)^Type:\s+backfill$`, r.stdout)
	assert.Regexp(t, `(?m)^Logical date:\s+`+regexp.QuoteMeta(fmtTime(from))+`$`, r.stdout)
	assert.Regexp(t, `(?m)^Data interval:\s+`+regexp.QuoteMeta(fmtTime(from)+" to "+fmtTime(to))+`$`, r.stdout)
	assert.Regexp(t, `(?m)^Conf:\s+dry_run=true limit=1000000 region=eu$`, r.stdout)
}

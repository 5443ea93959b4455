package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
)

func writeSpecFile(t *testing.T, dir, name, dagID string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	spec := "dag_id: " + dagID + "\ntasks:\n  - id: extract\n    command: [\"true\"]\n"
	require.NoError(t, os.WriteFile(path, []byte(spec), 0o644))
	return path
}

// applyRecorder fakes POST /v1/dags: the first apply of a dag_id creates
// it, later ones are unchanged; it keeps the YAML it received.
type applyRecorder struct {
	mu    sync.Mutex
	yamls []string
}

func (a *applyRecorder) register(f *fakeAPI) {
	seen := map[string]bool{}
	f.mux.HandleFunc("POST /v1/dags", func(w http.ResponseWriter, r *http.Request) {
		var req protocol.ApplyDAGRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fakeError(w, 400, protocol.CodeBadRequest, err.Error())
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.yamls = append(a.yamls, req.YAML)
		id := strings.TrimSpace(strings.SplitN(strings.TrimPrefix(req.YAML, "dag_id:"), "\n", 2)[0])
		result := "created"
		if seen[id] {
			result = "unchanged"
		}
		seen[id] = true
		fakeJSON(w, http.StatusOK, protocol.ApplyDAGResponse{DAGID: id, Result: result})
	})
}

func TestDagsApplyFilesAndDirectories(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := writeSpecFile(t, dir, "b.yml", "beta")
	writeSpecFile(t, dir, "a.yaml", "alpha")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("not a spec"), 0o644))
	other := writeSpecFile(t, t.TempDir(), "spec.txt", "gamma") // a file is taken whatever its name

	f := newFakeAPI(t)
	rec := &applyRecorder{}
	rec.register(f)
	// b.yml is named twice (directly and through dir): applied once.
	r := runCLI(t, append([]string{"dags", "apply", dir, b, other}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "dag alpha: created\ndag beta: created\ndag gamma: created\n", r.stdout)
	require.Len(t, rec.yamls, 3)
	raw, err := os.ReadFile(b)
	require.NoError(t, err)
	assert.Equal(t, string(raw), rec.yamls[1], "the raw YAML text is sent")

	r = runCLI(t, append([]string{"dags", "apply", "-o", "json", b}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	var res []protocol.ApplyDAGResponse
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, []protocol.ApplyDAGResponse{{DAGID: "beta", Result: "unchanged"}}, res)
}

func TestDagsApplyBadFileAppliesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSpecFile(t, dir, "a.yaml", "alpha")
	bad := filepath.Join(dir, "b.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("dag_id: beta\ntasks:\n  - id: x\n    command: []\n"), 0o644))

	f := newFakeAPI(t)
	(&applyRecorder{}).register(f)
	r := runCLI(t, append([]string{"dags", "apply", dir}, f.serverArgs()...)...)
	assert.Equal(t, exitError, r.code)
	require.Error(t, r.err)
	assert.Contains(t, r.err.Error(), bad)
	assert.Contains(t, r.err.Error(), "nothing applied")
	assert.Empty(t, f.requestLog(), "nothing is sent when any file is bad")
}

func TestDagsApplyDuplicateDagID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeSpecFile(t, dir, "a.yaml", "same")
	writeSpecFile(t, dir, "b.yaml", "same")
	f := newFakeAPI(t)
	r := runCLI(t, append([]string{"dags", "apply", dir}, f.serverArgs()...)...)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.err.Error(), "already declared in")
	assert.Empty(t, f.requestLog())
}

func TestDagsApplyArgs(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	r := runCLI(t, append([]string{"dags", "apply"}, f.serverArgs()...)...)
	assert.Equal(t, exitUsage, r.code)

	r = runCLI(t, append([]string{"dags", "apply", filepath.Join(t.TempDir(), "missing.yaml")}, f.serverArgs()...)...)
	assert.Equal(t, exitError, r.code)

	r = runCLI(t, append([]string{"dags", "apply", t.TempDir()}, f.serverArgs()...)...)
	assert.Equal(t, exitError, r.code)
	assert.Contains(t, r.err.Error(), "no DAG spec files")
	assert.Empty(t, f.requestLog())
}

func TestDagsList(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("GET /v1/dags", http.StatusOK, protocol.DAGList{DAGs: []protocol.DAG{
		{DAGID: "pipeline", Tasks: 3, Paused: true, SpecBytes: 412, UpdatedAt: cliTime(5)},
		{DAGID: "zeta", Tasks: 1, SpecBytes: 90, UpdatedAt: cliTime(6)},
	}})
	r := runCLI(t, append([]string{"dags", "list"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, []string{"DAG_ID", "TASKS", "PAUSED", "UPDATED"}, strings.Fields(lines[0]))
	assert.Equal(t, append([]string{"pipeline", "3", "true"}, strings.Fields(fmtTime(cliTime(5)))...), strings.Fields(lines[1]))
	assert.Equal(t, append([]string{"zeta", "1", "false"}, strings.Fields(fmtTime(cliTime(6)))...), strings.Fields(lines[2]))

	r = runCLI(t, append([]string{"dags", "list", "-o", "wide"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, "SPEC_BYTES", strings.Fields(lines[0])[4])
	assert.Equal(t, "412", strings.Fields(lines[1])[len(strings.Fields(lines[1]))-1], "the size the API reports, not the list's empty spec")

	r = runCLI(t, append([]string{"dags", "list", "-o", "json"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	var list protocol.DAGList // the API's shape (GET /v1/dags)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.Len(t, list.DAGs, 2)
	assert.Equal(t, "pipeline", list.DAGs[0].DAGID)
	assert.True(t, list.DAGs[0].Paused)
}

func TestDagsPauseAndUnpause(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.reply("POST /v1/dags/etl/pause", http.StatusOK, protocol.PauseDAGResponse{DAGID: "etl", Paused: true, Changed: true})
	f.reply("POST /v1/dags/etl/unpause", http.StatusOK, protocol.PauseDAGResponse{DAGID: "etl", Paused: false, Changed: false})

	r := runCLI(t, append([]string{"dags", "pause", "etl"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "dag etl paused\n", r.stdout)

	r = runCLI(t, append([]string{"dags", "unpause", "etl"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "dag etl already unpaused\n", r.stdout)

	r = runCLI(t, append([]string{"dags", "pause", "etl", "-o", "json"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	var res protocol.PauseDAGResponse
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, protocol.PauseDAGResponse{DAGID: "etl", Paused: true, Changed: true}, res)

	r = runCLI(t, append([]string{"dags", "pause"}, f.serverArgs()...)...)
	require.Error(t, r.err)
}

func TestDagsNext(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	day := func(d int) time.Time { return time.Date(2030, 1, d, 0, 0, 0, 0, time.UTC) }
	f.reply("GET /v1/dags/etl/next", http.StatusOK, protocol.NextSlots{DAGID: "etl", Schedule: "@daily", Paused: true,
		Slots: []protocol.ScheduleSlot{{LogicalDate: day(1), DataIntervalStart: day(1), DataIntervalEnd: day(2)}}})
	f.reply("GET /v1/dags/adhoc/next", http.StatusOK, protocol.NextSlots{DAGID: "adhoc", Slots: []protocol.ScheduleSlot{}})

	r := runCLI(t, append([]string{"dags", "next", "etl", "--count", "1"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Contains(t, r.stdout, "dag etl is paused")
	assert.Contains(t, r.stdout, "LOGICAL_DATE")
	assert.Contains(t, r.stdout, fmtTime(day(2)))
	assert.Contains(t, f.requestLog(), "GET /v1/dags/etl/next?count=1")

	r = runCLI(t, append([]string{"dags", "next", "etl", "-o", "name"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "2030-01-01T00:00:00Z\n", r.stdout)

	r = runCLI(t, append([]string{"dags", "next", "etl", "-o", "json"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	var res protocol.NextSlots
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, "etl", res.DAGID)
	require.Len(t, res.Slots, 1)
	assert.True(t, res.Slots[0].DataIntervalEnd.Equal(day(2)))

	r = runCLI(t, append([]string{"dags", "next", "adhoc"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "dag adhoc has no schedule\n", r.stdout)

	r = runCLI(t, append([]string{"dags", "next", "etl", "--count", "0"}, f.serverArgs()...)...)
	require.Error(t, r.err)
}

// The server's warnings about an applied DAG go to stderr, naming the
// file; the apply still succeeds, and -o json keeps them in the reply.
func TestDagsApplyPrintsWarnings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeSpecFile(t, dir, "train.yaml", "train")
	f := newFakeAPI(t)
	warning := "dag train task extract: tags [gpu]: no live agent offers tags [gpu] (0 live agents)"
	f.reply("POST /v1/dags", http.StatusOK, protocol.ApplyDAGResponse{DAGID: "train", Result: "created", Warnings: []string{warning}})
	r := runCLI(t, append([]string{"dags", "apply", path}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Equal(t, "dag train: created\n", r.stdout)
	assert.Equal(t, "warning: "+path+": "+warning+"\n", r.stderr)

	r = runCLI(t, append([]string{"dags", "apply", path, "-o", "json"}, f.serverArgs()...)...)
	require.NoError(t, r.err)
	assert.Contains(t, r.stdout, warning)
}

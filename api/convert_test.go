package api

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/reaper"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// fill sets every field of the struct v points to, recursively, to a
// non-zero value: what a conversion must carry across.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Bool:
		v.SetBool(true)
	}
}

// assertFilled fails for every zero field of v (a struct), recursively
// through embedded structs, except the named ones.
func assertFilled(t *testing.T, v reflect.Value, skip ...string) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Anonymous {
			assertFilled(t, v.Field(i), skip...)
			continue
		}
		if !slices.Contains(skip, f.Name) {
			assert.False(t, v.Field(i).IsZero(), "%s.%s is not converted", v.Type(), f.Name)
		}
	}
}

func filled[T any]() T {
	var v T
	fill(reflect.ValueOf(&v).Elem())
	return v
}

// Every field of each protocol shape is set from the store's, so a field
// added to both but forgotten here fails.
func TestConversionsCarryEveryField(t *testing.T) {
	reg := fromRegister(filled[protocol.RegisterRequest]())
	// The credential comes from a header and the threshold from the
	// scheduler, not from the body: register sets them itself.
	assertFilled(t, reflect.ValueOf(reg), "Credential", "StaleAfter")
	assertFilled(t, reflect.ValueOf(reg.InFlight[0]))
	assertFilled(t, reflect.ValueOf(fromHeartbeatEntries(filled[[]protocol.HeartbeatEntry]())[0]))
	assertFilled(t, reflect.ValueOf(fromComplete(filled[protocol.CompleteRequest]())))
	assertFilled(t, reflect.ValueOf(fromLogLines(filled[[]protocol.LogLine]())[0]))

	assertFilled(t, reflect.ValueOf(toStopOrders(filled[[]store.StopOrder]())[0]))
	// Secrets are opened by resolveSecrets, not converted: the store
	// holds only their references. Inputs are read by attachInputs.
	assertFilled(t, reflect.ValueOf(toClaimedTasks(filled[[]store.ClaimedTask]())[0]), "Secrets", "Inputs")
	assertFilled(t, reflect.ValueOf(toLogList(filled[store.LogPage]())))
	assertFilled(t, reflect.ValueOf(toLogList(filled[store.LogPage]()).Lines[0]))
	assertFilled(t, reflect.ValueOf(toDAGs(filled[[]store.DAGSummary]())[0]), "Spec") // GET /v1/dags lists no specs
	detail := toRunDetail(filled[store.RunPage]())
	assertFilled(t, reflect.ValueOf(detail))
	assertFilled(t, reflect.ValueOf(detail.TaskInstances[0]))
	page := toEventList(filled[store.EventPage]())
	assertFilled(t, reflect.ValueOf(page))
	assertFilled(t, reflect.ValueOf(page.Events[0]))
	assertFilled(t, reflect.ValueOf(toAgents(filled[[]store.Agent]())[0]))
}

// The JSON of a converted run is what it was when the store returned
// protocol types: plain state strings, omitted empty fields, task counts
// by state name.
func TestRunDetailJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	agent, exit := int64(3), 1
	d := store.RunDetail{
		Run: store.Run{ID: 9, DAGID: "d", State: state.RunFailed, Reason: state.ReasonExitCode, Message: "task a failed",
			QueuedAt: at, StartDate: &at, EndDate: &at,
			TaskCounts: map[state.TI]int{state.TIFailed: 1, state.TIUpstreamFailed: 1}},
		TaskInstances: []store.TaskInstance{
			{ID: 1, RunID: 9, TaskID: "a", State: state.TIFailed, Reason: state.ReasonExitCode, Message: "m",
				TryNumber: 1, MaxTries: 1, AttemptID: "u", AgentID: &agent, ExitCode: &exit, EndDate: &at},
			{ID: 2, RunID: 9, TaskID: "b", Ordinal: 1, State: state.TIUpstreamFailed, MaxTries: 1},
		},
	}
	got, err := json.Marshal(toRunDetail(store.RunPage{RunDetail: d}))
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":9,"dag_id":"d","state":"failed","reason":"exit_code","message":"task a failed",
		"queued_at":"2026-01-02T03:04:05Z","start_date":"2026-01-02T03:04:05Z","end_date":"2026-01-02T03:04:05Z",
		"task_counts":{"failed":1,"upstream_failed":1},
		"task_instances":[
		 {"id":1,"run_id":9,"task_id":"a","ordinal":0,"state":"failed","reason":"exit_code","message":"m","try_number":1,
		  "max_tries":1,"dispatch_attempts":0,"attempt_id":"u","agent_id":3,"exit_code":1,
		  "end_date":"2026-01-02T03:04:05Z"},
		 {"id":2,"run_id":9,"task_id":"b","ordinal":1,"state":"upstream_failed","try_number":0,"max_tries":1,
		  "dispatch_attempts":0}],
		"next_cursor":null}`, string(got))

	// A freshly triggered run has no counts: the field is left out.
	got, err = json.Marshal(toRun(store.Run{ID: 1, DAGID: "d", State: state.RunQueued, QueuedAt: at}))
	require.NoError(t, err)
	assert.Equal(t, `{"id":1,"dag_id":"d","state":"queued","queued_at":"2026-01-02T03:04:05Z"}`, string(got))
}

// Nil slices stay nil (JSON null) and empty ones empty ([]), as before the
// store had types of its own.
func TestConversionsKeepNilAndEmpty(t *testing.T) {
	enc := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, `{"events":[],"next_cursor":null}`, enc(toEventList(store.EventPage{Events: []store.Event{}})))
	assert.Nil(t, toEventList(store.EventPage{}).Events)
	assert.Nil(t, toStopOrders(nil))
	assert.NotNil(t, toStopOrders([]store.StopOrder{}))
	assert.Nil(t, toRunDetail(store.RunPage{}).TaskInstances)
	assert.NotNil(t, toRunDetail(store.RunPage{RunDetail: store.RunDetail{TaskInstances: []store.TaskInstance{}}}).TaskInstances)
	assert.Nil(t, toRun(store.Run{}).TaskCounts)
	assert.Nil(t, fromRegister(protocol.RegisterRequest{}).InFlight)
}

// The recovery views carry every field to the wire, and the lists the
// wire promises as [] are never null.
func TestRecoveryConversionsCarryEveryField(t *testing.T) {
	rep := toReapReport(filled[reaper.Report]())
	assertFilled(t, reflect.ValueOf(rep), "Leader", "Forwarded") // the API's own, set after
	assertFilled(t, reflect.ValueOf(rep.Candidates[0]))
	assertFilled(t, reflect.ValueOf(rep.Grace[0]))
	risk := toAtRisk(filled[reaper.AtRiskReport]())
	assertFilled(t, reflect.ValueOf(risk))
	assertFilled(t, reflect.ValueOf(risk.Running[0]))
	assertFilled(t, reflect.ValueOf(risk.Queued[0]))
	assertFilled(t, reflect.ValueOf(risk.Runs[0]))
	status := ReplicaReport(filled[reaper.Status]())
	assertFilled(t, reflect.ValueOf(status))
	assertFilled(t, reflect.ValueOf(status.Reapers[0]))

	assert.NotNil(t, toReapReport(reaper.Report{}).Candidates)
	empty := toAtRisk(reaper.AtRiskReport{})
	assert.True(t, empty.Running != nil && empty.Queued != nil && empty.Runs != nil)
	assert.Nil(t, empty.Grace, "grace is omitted when there is none")
	assert.NotNil(t, ReplicaReport(reaper.Status{}).Reapers)
}

// The outcomes state lists are the ones a completion may carry; any other
// word is refused.
func TestKnownOutcome(t *testing.T) {
	for _, o := range state.Outcomes() {
		assert.True(t, knownOutcome(o), o)
	}
	assert.False(t, knownOutcome("exploded"))
	assert.False(t, knownOutcome(""))
}

// The API validates ?limit against the protocol's maximum and the store
// refuses pages above its own: the two must agree.
func TestEventsPageMaxAgrees(t *testing.T) {
	assert.Equal(t, protocol.EventsPageMax, store.EventsPageMax)
}

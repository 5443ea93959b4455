package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/store"
)

// backfill creates the backfill runs of the DAG in the path for the
// schedule slots in the body's [from, to] (docs/schedules.md,
// "Backfill"). A from or to that is missing, not RFC 3339, or breaks a
// range rule is a 400 naming the field; a DAG without a schedule is a
// 409. A repeat creates nothing and says how many runs already existed.
func (s *Server) backfill(w http.ResponseWriter, r *http.Request) {
	var req protocol.BackfillRequest
	if !decode(w, r, &req) {
		return
	}
	from, ok := bodyTime(w, "from", req.From)
	if !ok {
		return
	}
	to, ok := bodyTime(w, "to", req.To)
	if !ok {
		return
	}
	res, err := s.cfg.Store.Backfill(r.Context(), r.PathValue("dag_id"), from, to)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.cfg.Metrics.ScheduleRunsCreated.WithLabelValues(store.RunBackfill).Add(float64(res.Created))
	s.log.Info("dag backfilled", "dag_id", res.DAGID, "from", from, "to", to, "slots", res.Slots,
		"created", res.Created, "existing", res.Existing)
	ids := res.RunIDs
	if ids == nil {
		ids = []int64{}
	}
	writeJSON(w, http.StatusOK, protocol.BackfillResponse{DAGID: res.DAGID, From: res.From, To: res.To,
		Slots: res.Slots, Created: res.Created, Existing: res.Existing, RunIDs: ids})
}

// bodyTime parses a required RFC 3339 field of a request body, writing a
// 400 naming it when it is missing or malformed.
func bodyTime(w http.ResponseWriter, field, v string) (time.Time, bool) {
	if v == "" {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, fmt.Sprintf("request body: %s: required (an RFC 3339 time)", field))
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("request body: %s: %q is not an RFC 3339 time such as 2026-01-02T00:00:00Z", field, v))
		return time.Time{}, false
	}
	return t, true
}

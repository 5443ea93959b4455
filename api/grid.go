package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/store"
)

// dagGrid serves GET /v1/dags/{dag_id}/grid?limit=N: the DAG's last N
// runs (default protocol.GridRunsDefault, at most GridRunsMax) with each
// TI's state and try, for the console's grid and duration chart. One
// read of runs_dag_idx and the runs' TIs by key: its cost is the runs
// shown, not the history (store.DAGGrid).
func (s *Server) dagGrid(w http.ResponseWriter, r *http.Request) {
	limit := protocol.GridRunsDefault
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > protocol.GridRunsMax {
			writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
				fmt.Sprintf("limit: %q must be an integer in 1..%d", v, protocol.GridRunsMax))
			return
		}
		limit = n
	}
	dagID := r.PathValue("dag_id")
	g, err := s.cfg.Store.DAGGrid(r.Context(), dagID, limit, protocol.GridCellsMax)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toDAGGrid(dagID, g))
}

func toDAGGrid(dagID string, g store.DAGGrid) protocol.DAGGrid {
	out := protocol.DAGGrid{DAGID: dagID, Tasks: g.Tasks, Limit: g.Limit, Runs: make([]protocol.GridRun, 0, len(g.Runs)),
		Truncated: g.Truncated}
	if out.Tasks == nil {
		out.Tasks = []string{}
	}
	for _, run := range g.Runs {
		gr := protocol.GridRun{ID: run.ID, State: string(run.State), RunType: run.RunType, QueuedAt: run.QueuedAt,
			StartDate: run.StartDate, EndDate: run.EndDate, LogicalDate: run.LogicalDate,
			TaskInstances: make([]protocol.GridCell, 0, len(run.TIs))}
		for _, ti := range run.TIs {
			gr.TaskInstances = append(gr.TaskInstances, protocol.GridCell{TaskID: ti.TaskID, State: string(ti.State), TryNumber: ti.TryNumber})
		}
		out.Runs = append(out.Runs, gr)
	}
	return out
}

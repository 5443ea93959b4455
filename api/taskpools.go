package api

import (
	"fmt"
	"net/http"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/store"
)

// Task pools (docs/pools.md): operator routes today (AccessOperator);
// the claim enforces a pool's slots, these only keep the pools.

// poolName reads and checks the {name} path parameter.
func poolName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if !dag.ValidPoolName(name) {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("path parameter name: %q %s", truncateForError(name), dag.PoolNameRule))
		return "", false
	}
	return name, true
}

func toPool(p store.TaskPool) protocol.Pool {
	return protocol.Pool{Name: p.Name, Slots: p.Slots, Running: p.Running, Queued: p.Queued,
		QueuedCapped: p.QueuedCapped, Description: p.Description, UpdatedAt: p.UpdatedAt}
}

// listPools answers GET /v1/pools.
func (s *Server) listPools(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.Store.ListTaskPools(r.Context())
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, protocol.PoolList{Pools: convertSlice(list, toPool)})
}

// setPool answers PUT /v1/pools/{name}: create the pool or change its
// slots; a pool shrunk below its running TIs admits none until they
// drain.
func (s *Server) setPool(w http.ResponseWriter, r *http.Request) {
	name, ok := poolName(w, r)
	if !ok {
		return
	}
	var req protocol.SetPoolRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Slots == nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("slots: required, an integer from 0 to %d", store.MaxPoolSlots))
		return
	}
	created, err := s.cfg.Store.SetTaskPool(r.Context(), name, *req.Slots, req.Description)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	p, err := s.cfg.Store.GetTaskPool(r.Context(), name)
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Info("pool set", "pool", name, "slots", *req.Slots, "created", created, "actor", actorOf(r))
	writeJSON(w, http.StatusOK, protocol.SetPoolResponse{Pool: toPool(p), Created: created})
}

// deletePool answers DELETE /v1/pools/{name}: 409 while a DAG names it or
// a TI of it has not ended (store.PoolInUseError).
func (s *Server) deletePool(w http.ResponseWriter, r *http.Request) {
	name, ok := poolName(w, r)
	if !ok {
		return
	}
	if err := s.cfg.Store.DeleteTaskPool(r.Context(), name); err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Info("pool deleted", "pool", name, "actor", actorOf(r))
	w.WriteHeader(http.StatusNoContent)
}

// deleteDAG answers DELETE /v1/dags/{dag_id}: 409 while the DAG has
// queued or running runs (store.LiveRunsError, naming them and the cancel
// command); its ended runs stay until retention removes them.
func (s *Server) deleteDAG(w http.ResponseWriter, r *http.Request) {
	dagID := r.PathValue("dag_id")
	if err := s.cfg.Store.DeleteDAG(r.Context(), dagID); err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Info("dag deleted", "dag_id", dagID, "actor", actorOf(r))
	writeJSON(w, http.StatusOK, protocol.DeleteDAGResponse{DAGID: dagID, Deleted: true})
}
